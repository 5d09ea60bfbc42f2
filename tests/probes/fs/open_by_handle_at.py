# FS: open_by_handle_at with a handle for inode 2 of the root filesystem ("shocker": opens
# files past every mount), and name_to_handle_at to learn a real handle.
SYS_name_to_handle_at, SYS_open_by_handle_at = 303, 304


class Handle(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("f", ctypes.c_ubyte * 8)]


forged = Handle(8, 1)  # FILEID_INO32_GEN: inode 2, generation 0
forged.f[0] = 2
mount_id = ctypes.c_int()
learned = Handle(8, 0)
fd = os.open("/", os.O_RDONLY)
outcome, err = attempt_all([
    (sys_call, SYS_open_by_handle_at, fd, ctypes.byref(forged), os.O_RDONLY),
    (sys_call, SYS_name_to_handle_at, -100, b"/etc/passwd", ctypes.byref(learned), ctypes.byref(mount_id), 0),
])
report(outcome, err, control=control_tmp_file())
