# PRIV: undo no_new_privs, raise an ambient capability, change securebits, make the process
# dumpable for root (2), rewrite the memory map, load a new filter through seccomp(2).
PR = {"SET_DUMPABLE": 4, "SET_SECUREBITS": 28, "SET_MM": 35, "SET_NO_NEW_PRIVS": 38,
      "GET_NO_NEW_PRIVS": 39, "CAP_AMBIENT": 47}
SYS_prctl, SYS_seccomp = 157, 317
calls = [
    (sys_call, SYS_prctl, PR["SET_NO_NEW_PRIVS"], 0, 0, 0, 0),
    (sys_call, SYS_prctl, PR["CAP_AMBIENT"], 2, 21, 0, 0),  # RAISE CAP_SYS_ADMIN
    (sys_call, SYS_prctl, PR["SET_SECUREBITS"], 0, 0, 0, 0),
    (sys_call, SYS_prctl, PR["SET_DUMPABLE"], 2, 0, 0, 0),
    (sys_call, SYS_prctl, PR["SET_MM"], 1, 0x10000, 0, 0),  # PR_SET_MM_START_CODE
    (sys_call, SYS_seccomp, 1, 8, 0),  # SECCOMP_SET_MODE_FILTER | NEW_LISTENER
]
outcome, err = attempt_all(calls)
still = sys_call(SYS_prctl, PR["GET_NO_NEW_PRIVS"], 0, 0, 0, 0) == 1
report(outcome, err, control=check("no_new_privs still set", still))
