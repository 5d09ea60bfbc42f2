# FS: hard links from /tmp to rootfs files (to write them, or keep them past a change).
calls = [(os.link, t, "/tmp/hard%d" % i) for i, t in enumerate(("/etc/passwd", "/runner.py", "/usr/bin/python3"))]
outcome, err = attempt_all(calls)
open("/tmp/a", "w").write("x")
os.link("/tmp/a", "/tmp/b")
report(outcome, err, control=check("hard link inside /tmp", open("/tmp/b").read() == "x"))
