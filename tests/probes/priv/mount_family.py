# PRIV: mount a tmpfs, remount the root read-write, bind /proc, detach /tmp or /proc to
# uncover what is below, pivot_root, chroot, and the new mount API.
MS_REMOUNT, MS_BIND, MNT_DETACH = 0x20, 0x1000, 2
SYS = {"mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
       "move_mount": 429, "fsopen": 430, "fsmount": 432, "fspick": 433, "mount_setattr": 442}
os.mkdir("/tmp/m")
calls = [
    (sys_call, SYS["mount"], b"tmpfs", b"/tmp/m", b"tmpfs", 0, 0),
    (sys_call, SYS["mount"], 0, b"/", 0, MS_REMOUNT | MS_BIND, 0),
    (sys_call, SYS["mount"], b"/proc", b"/tmp/m", 0, MS_BIND, 0),
    (sys_call, SYS["umount2"], b"/tmp", MNT_DETACH),
    (sys_call, SYS["umount2"], b"/proc", MNT_DETACH),
    (sys_call, SYS["pivot_root"], b"/tmp", b"/tmp/m"),
    (sys_call, SYS["chroot"], b"/tmp"),
    (sys_call, SYS["open_tree"], -100, b"/", 1),  # OPEN_TREE_CLONE
    (sys_call, SYS["move_mount"], -100, b"/tmp", -100, b"/tmp/m", 0),
    (sys_call, SYS["fsopen"], b"tmpfs", 0),
    (sys_call, SYS["fsmount"], 0, 0, 0),
    (sys_call, SYS["fspick"], -100, b"/", 0),
    (sys_call, SYS["mount_setattr"], -100, b"/", 0, 0, 0),
]
outcome, err = attempt_all(calls)
report(outcome, err, control=control_tmp_file())
