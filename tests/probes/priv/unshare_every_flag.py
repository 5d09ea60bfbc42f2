# PRIV: unshare(2) with every namespace flag, alone and together, and with high bits set.
SYS_unshare = 272
flags = {
    "NEWNS": 0x20000, "NEWCGROUP": 0x02000000, "NEWUTS": 0x04000000, "NEWIPC": 0x08000000,
    "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000, "NEWTIME": 0x80,
    "FILES": 0x400, "FS": 0x200, "SYSVSEM": 0x40000,
}
values = list(flags.values()) + [sum(flags.values()), 0x10000000 | 1 << 32, 0]
outcome, err = attempt_all([(sys_call, SYS_unshare, v) for v in values])
report(outcome, err, control=control_fork())
