# ISO: watch inodes the host and other runs share: inotify on /dev/null, /dev/urandom and
# /runner.py, dnotify (F_NOTIFY) on /, fanotify, and a lease (F_SETLEASE) on /runner.py.
# Control: a temp file in /tmp.
import fcntl

SYS_inotify_init1, SYS_fanotify_init = 294, 300
F_SETLEASE, F_NOTIFY, DN_ACCESS, DN_MULTISHOT = 1024, 1026, 1, 0x80000000
root = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
runner = os.open("/runner.py", os.O_RDONLY)
outcome, err = attempt_all([
    (sys_call, SYS_inotify_init1, 0),
    (sys_call, SYS_fanotify_init, 0, 0),
    (fcntl.fcntl, root, F_NOTIFY, DN_ACCESS | DN_MULTISHOT),
    (fcntl.fcntl, runner, F_SETLEASE, fcntl.F_RDLCK),
])
report(outcome, err, control=control_tmp_file())
