# FS: give a /tmp file to root, or file capabilities (security.capability), or a trusted.*
# attribute.
open("/tmp/f", "w").write("x")
caps = b"\x01\x00\x00\x02" + b"\xff" * 4 + b"\x00" * 12  # VFS_CAP_REVISION_2, all permitted
calls = [
    (os.chown, "/tmp/f", 0, 0),
    (os.chown, "/tmp/f", -1, 0),
    (os.setxattr, "/tmp/f", "security.capability", caps),
    (os.setxattr, "/tmp/f", "trusted.probe", b"x"),
]
outcome, err = attempt_all(calls)
os.chmod("/tmp/f", 0o600)
report(outcome, err, control=check("chmod own file", os.stat("/tmp/f").st_mode & 0o777 == 0o600))
