# QUOTA: POSIX message queue bytes are a per-user host counter (RLIMIT_MSGQUEUE): create a
# queue; the limit inside must be 0 either way. Control: a System V-free pipe still works.
import resource

SYS_mq_open = 240
name = ctypes.create_string_buffer(b"probe-queue")
outcome, err = attempt(sys_call, SYS_mq_open, name, os.O_CREAT | os.O_RDWR, 0o600, 0)
limit = resource.getrlimit(resource.RLIMIT_MSGQUEUE)
if limit != (0, 0):
    outcome, err = "allowed", "RLIMIT_MSGQUEUE %r" % (limit,)
report(outcome, err, control=control_tmp_file())
