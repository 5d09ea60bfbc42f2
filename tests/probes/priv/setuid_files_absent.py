# PRIV: no setuid or setgid file, and no file capability, anywhere in the root.
import stat

found = []
files = 0
for root, dirs, names in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys")]
    for name in names:
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        files += 1
        if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            found.append(path)
        try:
            os.getxattr(path, "security.capability", follow_symlinks=False)
            found.append(path + " (file caps)")
        except OSError:
            pass
report("allowed" if found else "denied", ", ".join(found[:5]) or None, control=check("walked the root", files > 100))
