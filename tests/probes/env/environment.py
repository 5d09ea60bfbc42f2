# ENV: the environment holds nothing of the host's. Native: empty. Docker: PATH (Docker's
# default), HOSTNAME=sandbox, HOME=/nonexistent (README, src/sandbox/docker/mod.rs).
documented = {"PATH": None, "HOSTNAME": "sandbox", "HOME": "/nonexistent"}
env = dict(os.environ)
leaks = [k for k, v in env.items() if k not in documented or documented[k] not in (None, v)]
leaks += [k for k, v in env.items() if any(s in v for s in HOST["strings"])]
if "PATH" in env and not set(env["PATH"].split(":")) <= {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}:
    leaks.append("PATH=" + env["PATH"])
report("allowed" if leaks else "denied", ", ".join(sorted(set(leaks))) or None, keys=sorted(env))
