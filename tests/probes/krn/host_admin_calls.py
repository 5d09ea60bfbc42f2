# KRN: host administration: clock, hostname of the host, accounting, swap, quotas, port
# I/O, LDT, NUMA pages, fanotify, a second filter or Landlock domain, exec by descriptor.
ts = (ctypes.c_long * 2)(0, 0)
calls = [
    (sys_call, 164, ts, 0),  # settimeofday
    (sys_call, 227, 0, ts),  # clock_settime(CLOCK_REALTIME)
    (sys_call, 159, (ctypes.c_ubyte * 208)()),  # adjtimex
    (sys_call, 170, b"owned", 5),  # sethostname
    (sys_call, 171, b"owned", 5),  # setdomainname
    (sys_call, 163, b"/tmp/acct"),  # acct
    (sys_call, 167, b"/tmp/swap", 0),  # swapon
    (sys_call, 179, 0, b"/", 0, 0),  # quotactl
    (sys_call, 172, 3),  # iopl
    (sys_call, 173, 0, 1024, 1),  # ioperm
    (sys_call, 154, 1, (ctypes.c_ubyte * 16)(), 16),  # modify_ldt
    (sys_call, 256, 1, 8, 0, 0),  # migrate_pages
    (sys_call, 238, 1, 0, 0),  # set_mempolicy
    (sys_call, 300, 0, 0),  # fanotify_init
    (sys_call, 444, 0, 0, 1),  # landlock_create_ruleset (version query)
    (sys_call, 322, -100, b"/usr/bin/python3", 0, 0, 0),  # execveat
    (sys_call, 153),  # vhangup
]
outcome, err = attempt_all(calls)
report(outcome, err, control=check("hostname is the sandbox's", os.uname().nodename == "sandbox"))
