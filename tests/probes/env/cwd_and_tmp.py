# ENV: the cwd is /tmp, and /tmp starts empty (nothing from the host or an earlier run).
left = os.listdir("/tmp")
bad = []
if os.getcwd() != "/tmp":
    bad.append("cwd " + os.getcwd())
if left:
    bad.append("/tmp holds %s" % left[:5])
report("allowed" if bad else "denied", "; ".join(bad) or None)
