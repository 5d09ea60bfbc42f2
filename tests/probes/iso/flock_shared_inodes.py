# ISO: take BSD locks (flock) on inodes the host and every other run share: /dev/null (a
# host `flock -n /dev/null` would fail), the rootfs's /runner.py and /usr/bin/python3.
# Control: sqlite3, which locks its database in /tmp with POSIX record locks, works.
import fcntl
import sqlite3

files = [open("/dev/null", "rb"), open("/runner.py", "rb"), open("/usr/bin/python3", "rb")]
calls = []
for f in files:
    calls.append((fcntl.flock, f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB))
    calls.append((fcntl.flock, f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB))
outcome, err = attempt_all(calls)
db = sqlite3.connect("/tmp/probe.db")
db.execute("create table t (x)")
db.execute("insert into t values (42)")
db.commit()
ok = db.execute("select x from t").fetchone() == (42,)
db.close()
report(outcome, err, control=check("sqlite3 database in /tmp", ok))
