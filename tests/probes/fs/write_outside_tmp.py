# FS: write anywhere outside /tmp: create a file in every directory of the root (but /proc,
# /tmp), open every regular file for writing, and make a directory at the top.
calls = [(os.mkdir, "/probe-dir")]
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "tmp", "sys")]
    calls.append((os.open, os.path.join(root, ".probe-write"), os.O_WRONLY | os.O_CREAT, 0o644))
    for name in files:
        path = os.path.join(root, name)
        if os.path.isfile(path) and not os.path.islink(path):
            calls.append((os.open, path, os.O_WRONLY | os.O_APPEND))
outcome, err = attempt_all(calls)
report(outcome, err, tried=len(calls), control=control_tmp_file())
