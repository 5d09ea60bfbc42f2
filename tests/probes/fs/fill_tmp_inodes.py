# FS: fill /tmp with empty files (long names: the most kernel memory per inode) until
# creating one fails. /tmp's inode cap (nr_inodes, README "Security model") must stop it with
# ENOSPC long before the kernel's default (half the host's RAM pages): each inode and
# dentry is host kernel memory that no rlimit counts. Stops by itself at 100,000 files
# ("allowed"). The control: a thousand files fit, and once they are removed /tmp takes
# files again, and the run goes on.
made = []
err = None
try:
    for i in range(100_000):
        path = "/tmp/%0200d" % i
        open(path, "w").close()
        made.append(path)
except OSError as e:
    err = ename(e.errno)
count = len(made)
for path in made:
    os.unlink(path)
ok = count >= 1000 and control_tmp_file() == "ok"
report(
    "denied" if err else "allowed",
    err,
    files=count,
    control=check("a thousand files fit and /tmp works after", ok),
)
