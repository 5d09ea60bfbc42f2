# ENV: uid, gid, groups and the passwd entry are nobody's; /etc/passwd and /etc/group list
# only root and nobody (no host accounts).
import grp
import pwd

me = pwd.getpwuid(os.getuid())
bad = []
if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (65534,) * 4:
    bad.append("ids %r" % ((os.getuid(), os.geteuid(), os.getgid(), os.getegid()),))
if set(os.getgroups()) - {65534}:
    bad.append("groups %r" % os.getgroups())
if (me.pw_name, me.pw_dir) != ("nobody", "/nonexistent"):
    bad.append("passwd %r" % (me,))
users = sorted(p.pw_name for p in pwd.getpwall())
groups = sorted(g.gr_name for g in grp.getgrall())
if set(users) - {"root", "nobody"} or set(groups) - {"root", "nogroup"}:
    bad.append("accounts %r %r" % (users, groups))
for name in HOST["users"]:
    if name in users:
        bad.append("host user " + name)
report("allowed" if bad else "denied", "; ".join(bad) or None, users=users)
