# FS, positive control: /tmp takes files, directories, renames, links and 8 MiB of data,
# and is the cwd.
import tempfile

with tempfile.NamedTemporaryFile(dir="/tmp", delete=False) as f:
    f.write(b"x" * (8 << 20))
os.mkdir("/tmp/d")
os.rename(f.name, "/tmp/d/data")
os.symlink("/tmp/d/data", "/tmp/l")
ok = os.path.getsize("/tmp/l") == 8 << 20 and os.getcwd() == "/tmp"
os.unlink("/tmp/d/data")
report("allowed" if ok else "denied", None, control=check("temp files in /tmp", ok))
