# PRIV: trace the parent (the runner, pid 1) from a child, trace ourselves, read or write
# another process's memory, steal a descriptor through a pidfd, compare kernel objects.
SYS = {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_open": 434,
       "pidfd_getfd": 438, "kcmp": 312}
PTRACE_TRACEME, PTRACE_ATTACH, PTRACE_SEIZE = 0, 16, 0x4206
code = """
import os, json
calls = [(sys_call, %(ptrace)d, %(attach)d, os.getppid(), 0, 0),
         (sys_call, %(ptrace)d, %(seize)d, 1, 0, 0),
         (sys_call, %(ptrace)d, %(traceme)d, 0, 0, 0)]
print(json.dumps(attempt_all(calls)))
""" % {"ptrace": SYS["ptrace"], "attach": PTRACE_ATTACH, "seize": PTRACE_SEIZE, "traceme": PTRACE_TRACEME}
status, out = run_child(code)
child = json.loads(out) if status == 0 else ["allowed", "child failed: %d" % status]
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
pidfd = sys_call(SYS["pidfd_open"], 1, 0)  # allowed: a pidfd of our own namespace's pid 1
calls = [
    (sys_call, SYS["ptrace"], PTRACE_ATTACH, HOST["sentinel_pid"], 0, 0),
    (sys_call, SYS["process_vm_readv"], 1, iov, 1, iov, 1, 0),
    (sys_call, SYS["process_vm_writev"], 1, iov, 1, iov, 1, 0),
    (sys_call, SYS["pidfd_getfd"], pidfd, 0, 0),
    (sys_call, SYS["kcmp"], 1, os.getpid(), 0, 0, 0),
    (sys_call, SYS["pidfd_open"], HOST["sentinel_pid"], 0),
]
outcome, err = attempt_all(calls)
if child[0] != "denied":
    outcome, err = child
else:
    err = "|".join(sorted(set(err.split("|")) | set(child[1].split("|"))))
report(outcome, err, control=control_subprocess())
