# FS: a setuid-root copy of python in /tmp: chown it to root, set u+s, exec it. Reports each
# barrier as observed: chown to root (root is not mapped in the sandbox's user namespace, or
# the caller lacks the capability), whether the setuid bit stuck, the exec's errno, and the
# nosuid and noexec flags of /tmp and no_new_privs. The outcome is the chown's: no file of
# root's can be made, so no setuid-root program exists to exec.
import shutil

shutil.copy("/usr/bin/python3", "/tmp/suid")
outcome, err = attempt(os.chown, "/tmp/suid", 0, 0)
os.chmod("/tmp/suid", 0o4755)
setuid_bit = bool(os.stat("/tmp/suid").st_mode & 0o4000)
exec_outcome, exec_err = attempt(subprocess.run, ["/tmp/suid", "-c", "import os; print(os.geteuid())"])
flags = os.statvfs("/tmp").f_flag
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
no_new_privs = status.get("NoNewPrivs", "").strip() == "1"
report(
    outcome,
    err,
    setuid_bit=setuid_bit,
    exec=exec_err or exec_outcome,
    nosuid=bool(flags & os.ST_NOSUID),
    noexec=bool(flags & os.ST_NOEXEC),
    no_new_privs=no_new_privs,
    control=check("a file of our own takes chown to ourselves", attempt(os.chown, "/tmp/suid", os.getuid(), os.getgid())[0] == "allowed"),
)
