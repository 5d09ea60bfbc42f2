# ISO: change the times and mode of /dev/null, /dev/zero, /dev/random and /dev/urandom. Where
# a node is the host's own inode (same device and inode number as HOST["devices"]), every
# change must fail; a node made for this sandbox alone ("PRIVATE") is no host inode.
# Control: /dev/null still takes writes and /dev/urandom still gives bytes.
names = []
for node in ("null", "zero", "random", "urandom"):
    path = "/dev/" + node
    st = os.stat(path)
    shared = HOST["devices"].get(node) == [st.st_dev, st.st_ino]
    for f, args in ((os.utime, (path, None)), (os.utime, (path, (1, 1))), (os.chmod, (path, 0o600))):
        outcome, name = attempt(f, *args)
        if outcome == "allowed":
            if shared:
                report("allowed", "%s%r on the host's inode" % (f.__name__, args))
                raise SystemExit
            name = "PRIVATE"
        if name not in names:
            names.append(name)
with open("/dev/null", "wb") as f:
    f.write(b"x")
with open("/dev/urandom", "rb") as f:
    ok = len(f.read(16)) == 16
report("denied", "|".join(sorted(names)), control=check("/dev/null and /dev/urandom work", ok))
