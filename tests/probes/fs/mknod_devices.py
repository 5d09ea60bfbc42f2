# FS: make device nodes (a disk, /dev/mem, a tty) and a FIFO in /tmp.
import stat

calls = [
    (os.mknod, "/tmp/sda", stat.S_IFBLK | 0o600, os.makedev(8, 0)),
    (os.mknod, "/tmp/mem", stat.S_IFCHR | 0o600, os.makedev(1, 1)),
    (os.mknod, "/tmp/tty", stat.S_IFCHR | 0o600, os.makedev(5, 0)),
    (os.mknod, "/tmp/fifo", stat.S_IFIFO | 0o600),
]
outcome, err = attempt_all(calls)
report(outcome, err, control=control_tmp_file())
