# ENV: the network namespace has only a loopback: no host interface, route or socket.
devs = [l.split(":")[0].strip() for l in open("/proc/self/net/dev").read().splitlines()[2:]]
routes = open("/proc/self/net/route").read().splitlines()[1:]
unix = open("/proc/self/net/unix").read().splitlines()[1:]
host = [l for l in unix if HOST["abstract"] in l or HOST["unix_path"] in l]
bad = [d for d in devs if d != "lo"] + routes + host
report("allowed" if bad else "denied", ", ".join(bad)[:200] or None, interfaces=devs)
