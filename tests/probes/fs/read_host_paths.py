# FS: read host paths: the host's home, /root, a secret file the test wrote on the host,
# /etc/shadow (directly and through /proc/1/root), the host's docker and ssh config.
paths = [
    HOST["home"],
    HOST["secret_path"],
    "/root",
    "/home",
    "/etc/shadow",
    "/proc/1/root/etc/shadow",
    "/proc/1/root/root",
    "/etc/ssh",
    "/var/lib/docker",
    "/run/user",
    os.path.join(HOST["home"], ".ssh"),
]


def read(path):
    if os.path.isdir(path):
        os.listdir(path)
    else:
        open(path, "rb").read(1)


outcome, err = attempt_all([(read, p) for p in paths])
report(outcome, err, control=check("read a rootfs file", open("/etc/passwd").read(4) == "root"))
