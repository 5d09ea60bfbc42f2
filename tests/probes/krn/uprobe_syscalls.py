# KRN: syscalls 335 (uretprobe, Linux >= 6.11) and 336 (uprobe, >= 6.16) on x86_64. The
# kernel runs them past every seccomp filter (so uprobes work in sandboxes); called from
# anywhere but a uprobe trampoline, uretprobe raises SIGILL and uprobe fails with ENXIO.
# On older kernels both are unknown numbers (denied). Each in a child.
def child(nr):
    status, out = run_child("""
try:
    sys_call(%d, 0, 0, 0)
    print('returned')
except OSError as e:
    print(ename(e.errno))
""" % nr)
    if status < 0:
        return "killed", _signal.Signals(-status).name
    if out.strip() in ("EPERM", "ENOSYS", "ENXIO"):
        return "denied", out.strip()
    return "allowed", out.strip() or "exit %d" % status


outcome, err = child(335)
uprobe = child(336)
if uprobe[0] == "allowed":
    outcome, err = uprobe
report(outcome, err, uprobe=uprobe[1], control=control_subprocess())
