# LIFE: clear the death signal (PR_SET_PDEATHSIG 0) in pid 1 and in a child, also with high
# bits set in the option word, and become a child subreaper. Cleared, pid 1 would outlive a
# killed launcher. Control: naming the process (PR_SET_NAME) still works.
SYS_prctl = 157
PR_SET_PDEATHSIG, PR_SET_NAME, PR_GET_NAME, PR_SET_CHILD_SUBREAPER = 1, 15, 16, 36
calls = [
    (sys_call, SYS_prctl, PR_SET_PDEATHSIG, 0, 0, 0, 0),
    (sys_call, SYS_prctl, PR_SET_PDEATHSIG | 1 << 32, 0, 0, 0, 0),
    (sys_call, SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0),
]
outcome, err = attempt_all(calls)
code, out = run_child(
    "print(attempt(sys_call, 157, 1, 0, 0, 0, 0)[1])"
)
child = out.strip()
if child != err:
    outcome, err = ("allowed", "in a child: " + child) if child == "None" else (outcome, err + "|" + child)
name = ctypes.create_string_buffer(b"probe-name")
sys_call(SYS_prctl, PR_SET_NAME, name, 0, 0, 0)
got = ctypes.create_string_buffer(16)
sys_call(SYS_prctl, PR_GET_NAME, got, 0, 0, 0)
report(outcome, err, control=check("PR_SET_NAME", got.value == b"probe-name"))
