# QUOTA: kernel keys are a per-user host counter (kernel.keys.maxkeys): add a key, request
# one, join a new session keyring. Control: a temp file in /tmp.
SYS_add_key, SYS_request_key, SYS_keyctl = 248, 249, 250
KEY_SPEC_PROCESS_KEYRING, KEYCTL_JOIN_SESSION_KEYRING = -2, 1
user = ctypes.create_string_buffer(b"user")
desc = ctypes.create_string_buffer(b"probe")
data = ctypes.create_string_buffer(b"x" * 64)
outcome, err = attempt_all([
    (sys_call, SYS_add_key, user, desc, data, 64, KEY_SPEC_PROCESS_KEYRING),
    (sys_call, SYS_request_key, user, desc, 0, 0),
    (sys_call, SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, 0),
])
report(outcome, err, control=control_tmp_file())
