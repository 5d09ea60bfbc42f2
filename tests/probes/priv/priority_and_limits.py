# PRIV: real-time scheduling (starves the host's CPUs), negative nice, raising hard limits,
# an I/O priority class, locking memory.
SYS = {"setpriority": 141, "sched_setscheduler": 144, "prlimit64": 302, "ioprio_set": 251,
       "sched_setattr": 314, "mlockall": 151}
param = ctypes.c_int(50)
limit = (ctypes.c_uint64 * 2)(1 << 20, 1 << 20)
rtprio = (ctypes.c_uint64 * 2)(99, 99)
calls = [
    (sys_call, SYS["sched_setscheduler"], 0, 1, ctypes.byref(param)),  # SCHED_FIFO
    (sys_call, SYS["sched_setscheduler"], 0, 2, ctypes.byref(param)),  # SCHED_RR
    (sys_call, SYS["setpriority"], 0, 0, -20),
    (sys_call, SYS["prlimit64"], 0, 7, ctypes.byref(limit), 0),  # RLIMIT_NOFILE
    (sys_call, SYS["prlimit64"], 0, 14, ctypes.byref(rtprio), 0),  # RLIMIT_RTPRIO
    (sys_call, SYS["prlimit64"], 0, 6, ctypes.byref(limit), 0),  # RLIMIT_NPROC
    (sys_call, SYS["ioprio_set"], 1, 0, 1 << 13),  # IOPRIO_CLASS_RT
    (sys_call, SYS["mlockall"], 3),
]
outcome, err = attempt_all(calls)
os.nice(1)
report(outcome, err, control=check("lowering our own priority works", os.getpriority(os.PRIO_PROCESS, 0) >= 1))
