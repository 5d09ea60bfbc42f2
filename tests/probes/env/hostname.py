# ENV: the host name, domain name and kernel host name are the sandbox's, never the host's.
import socket

names = {
    "uname": os.uname().nodename,
    "gethostname": socket.gethostname(),
    "proc": open("/proc/sys/kernel/hostname").read().strip() if os.path.exists("/proc/sys/kernel/hostname") else "sandbox",
}
domain = open("/proc/sys/kernel/domainname").read().strip() if os.path.exists("/proc/sys/kernel/domainname") else "(none)"
bad = {k: v for k, v in names.items() if v != "sandbox"}
if domain not in ("(none)", ""):
    bad["domainname"] = domain
report("allowed" if bad else "denied", json.dumps(bad) if bad else None)
