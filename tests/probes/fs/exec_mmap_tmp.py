# FS: run code from /tmp without execve: map a /tmp copy of python executable, load it from
# /tmp through the dynamic loader, and dlopen a /tmp copy of a shared library (exec of /tmp
# itself is in controls.rs). Each attempt reports what it observed; the controls do the same
# with the originals, outside /tmp, so only the copy's place can explain a refusal.
import glob
import mmap
import shutil

shutil.copy("/usr/bin/python3", "/tmp/py")
os.chmod("/tmp/py", 0o755)
LIBRARY = sorted(glob.glob("/usr/lib/python3*/lib-dynload/*.so"))[0]
shutil.copy(LIBRARY, "/tmp/lib.so")
LOADER = [p for p in ("/lib64/ld-linux-x86-64.so.2", "/usr/lib64/ld-linux-x86-64.so.2") if os.path.exists(p)][0]


class LoaderRefused(OSError):
    """The dynamic loader reports no errno, only text on stderr."""


class DlopenRefused(OSError):
    """dlopen(3) reports no errno, only text."""


def map_exec(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        mmap.mmap(fd, 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)
    finally:
        os.close(fd)


def loader(path):
    r = subprocess.run([LOADER, path, "-I", "-S", "-c", "print(1)"], capture_output=True)
    if r.returncode != 0 or r.stdout != b"1\n":
        raise LoaderRefused("loader: %r" % r.stderr[-120:])


def dlopen(path):
    try:
        ctypes.CDLL(path)
    except OSError as e:
        raise DlopenRefused(str(e)[:120]) from None


outcome, err = attempt_all([(map_exec, "/tmp/py"), (loader, "/tmp/py"), (dlopen, "/tmp/lib.so")])
controls = [attempt(f, path) for f, path in ((map_exec, "/usr/bin/python3"), (loader, "/usr/bin/python3"), (dlopen, LIBRARY))]
report(
    outcome,
    err,
    control=check("the same three from the originals", all(o == "allowed" for o, _ in controls)),
    originals=controls,
)
