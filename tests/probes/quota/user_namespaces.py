# QUOTA: user namespaces are a per-user host counter (user.max_user_namespaces): unshare and
# clone with CLONE_NEWUSER. Control: a plain fork works.
SYS_unshare, SYS_clone = 272, 56
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
outcome, err = attempt_all([
    (sys_call, SYS_unshare, CLONE_NEWUSER),
    (sys_call, SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0),
])
report(outcome, err, control=control_fork())
