# ENV: the mount table shows the sandbox's own mounts: the root (read-only), /tmp, /dev,
# /proc (Docker adds its /etc files, /dev/mqueue, /dev/pts, /sys and /proc masks). No host
# path of the user's (home, the test's strings), not the rootfs cache directory
# (…/mcp-code-mode/rootfs-…), and no host mount points appear, in any field: natively the
# root is an overlay whose layers are named relative to the rootfs (`lowerdir=.:proc/empty`).
lines = open("/proc/self/mountinfo").read().splitlines()
text = "\n".join(lines)
leaks = [s for s in HOST["strings"] + ["mcp-code-mode/rootfs-"] if s in text]
points = sorted({l.split()[4] for l in lines})
allowed = ("/", "/tmp", "/dev", "/proc", "/sys", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf")
foreign = [p for p in points if not (p in allowed or p.startswith(("/dev/", "/proc/", "/sys/")))]
root = [l for l in lines if l.split()[4] == "/"]
ro = all(l.split()[5].split(",")[0] == "ro" for l in root)
bad = leaks + foreign + ([] if ro else ["root is not read-only"])
report("allowed" if bad else "denied", ", ".join(bad) or None, mounts=points)
