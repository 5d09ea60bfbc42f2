# ENV: /etc holds the rootfs's passwd and group (and, on Docker, the hosts, hostname and
# resolv.conf Docker generates: nameserver 0.0.0.0, the sandbox's name; and its mtab link
# to /proc/mounts). No host name, user, address or resolver.
found = {}
for name in sorted(os.listdir("/etc")):
    try:
        found[name] = open("/etc/" + name).read()
    except OSError:
        pass
bad = sorted(set(found) - {"passwd", "group", "hosts", "hostname", "resolv.conf", "mtab"})
if "mtab" in found and not os.readlink("/etc/mtab").startswith(("/proc/", "../proc/")):
    bad.append("mtab")
text = "\n".join(found.values())
bad += [s for s in HOST["strings"] if s in text]
resolv = [l for l in found.get("resolv.conf", "").splitlines() if l.startswith("nameserver")]
bad += [l for l in resolv if l.split()[1] != "0.0.0.0"]
report("allowed" if bad else "denied", ", ".join(bad) or None, files=sorted(found))
