# FS: a setuid-root copy of python in /tmp (chmod u+s, chown 0), then exec it.
import shutil
import stat

shutil.copy("/usr/bin/python3", "/tmp/suid")
owned = attempt(os.chown, "/tmp/suid", 0, 0)[1]
os.chmod("/tmp/suid", 0o4755)
outcome, err = attempt(subprocess.run, ["/tmp/suid", "-c", "import os; print(os.geteuid())"])
nosuid = bool(os.statvfs("/tmp").f_flag & os.ST_NOSUID)
report(outcome, err, chown=owned, nosuid=nosuid, control=check("/tmp is nosuid", nosuid))
