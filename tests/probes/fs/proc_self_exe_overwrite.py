# FS: overwrite the running interpreter through /proc/self/exe (CVE-2019-5736's route),
# and the interpreter's file and libc by path.
import glob

targets = ["/proc/self/exe", "/proc/1/exe", os.path.realpath("/proc/self/exe")]
targets += glob.glob("/usr/lib/x86_64-linux-gnu/libc.so*")
calls = [(os.open, t, flag) for t in targets for flag in (os.O_WRONLY, os.O_RDWR | os.O_TRUNC)]
outcome, err = attempt_all(calls)
report(outcome, err, control=check("read /proc/self/exe", len(open("/proc/self/exe", "rb").read(4)) == 4))
