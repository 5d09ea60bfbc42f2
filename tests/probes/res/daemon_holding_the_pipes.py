# RES: a double-forked daemon in its own session, named HOST["marker"], that keeps every
# descriptor it inherited open (the code's stdout and stderr, and the runner's protocol pipes
# to the host) and spins on the CPU. The cell then ends. The run must end with the cell's
# result, not wait for the pipes' end of file or for the deadline, and the daemon must die
# with it: the host looks for it afterwards. (life/daemon_outlives_the_run is the daemon that
# closes every descriptor and tries to clear its death signal.)
import signal

r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        libc.prctl(15, HOST["marker"].encode(), 0, 0, 0)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        held = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
        os.write(w, json.dumps({"pid": os.getpid(), "fds": held}).encode())
        os.close(w)
        while True:
            pass
    os._exit(0)
os.close(w)
daemon = json.loads(os.read(r, 4096))
os.wait()
alive = os.path.exists("/proc/%d" % daemon["pid"])
protocol = sorted(runner_fds().values())
holds = all(fd in daemon["fds"] for fd in protocol)
report(
    "started" if alive and holds else "denied",
    None,
    daemon=daemon["pid"],
    control=check("the daemon holds the protocol descriptors %s" % protocol, holds),
)
