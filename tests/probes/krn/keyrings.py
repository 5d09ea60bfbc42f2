# KRN: the kernel keyrings (not namespaced): add_key, request_key, keyctl.
outcome, err = attempt_all([
    (sys_call, 248, b"user", b"probe", b"secret", 6, -2),  # add_key to the user keyring
    (sys_call, 249, b"user", b"probe", 0, -2),  # request_key
    (sys_call, 250, 0, -3, 0),  # keyctl(KEYCTL_GET_KEYRING_ID, session)
    (sys_call, 250, 1, 0),  # keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)
])
report(outcome, err, control=control_tmp_file())
