# FS: a /tmp symlink to /etc/passwd, /runner.py and the python binary, then write
# through it (and rename a /tmp file over /etc/passwd).
calls = []
for i, target in enumerate(("/etc/passwd", "/runner.py", "/usr/bin/python3")):
    link = "/tmp/link%d" % i
    os.symlink(target, link)
    calls.append((os.open, link, os.O_WRONLY | os.O_APPEND))
    calls.append((os.open, link, os.O_WRONLY | os.O_TRUNC))
open("/tmp/evil", "w").write("root::0:0::/:/bin/sh\n")
calls.append((os.rename, "/tmp/evil", "/etc/passwd"))
calls.append((os.replace, "/tmp/evil", "/runner.py"))
outcome, err = attempt_all(calls)
control = check("read through a symlink", open("/tmp/link0").read(4) == "root")
report(outcome, err, control=control)
