# FS: run code from /tmp without execve: map a /tmp copy of libc executable, and load the
# interpreter from /tmp through the dynamic loader (exec of /tmp itself is in
# threat_model.rs).
import mmap
import shutil

shutil.copy("/usr/bin/python3", "/tmp/py")
os.chmod("/tmp/py", 0o755)


def map_exec():
    fd = os.open("/tmp/py", os.O_RDONLY)
    mmap.mmap(fd, 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)


def loader():
    loaders = [p for p in ("/lib64/ld-linux-x86-64.so.2", "/usr/lib64/ld-linux-x86-64.so.2") if os.path.exists(p)]
    r = subprocess.run([loaders[0], "/tmp/py", "-c", "print(1)"], capture_output=True)
    if r.returncode == 0 and r.stdout == b"1\n":
        return
    raise OSError(_errno.EACCES, "loader refused: %r" % r.stderr[-120:])


class DlopenRefused(OSError):
    """dlopen(3) reports no errno, only text."""


def ctypes_load():
    try:
        ctypes.CDLL("/tmp/py")
    except OSError as e:
        raise DlopenRefused(str(e)[:80]) from None


outcome, err = attempt_all([(map_exec,), (loader,), (ctypes_load,)])
report(outcome, err, control=control_subprocess())
