# KRN: load or unload kernel modules, load a new kernel, reboot.
image = ctypes.create_string_buffer(b"\x7fELF" + b"\0" * 60)
fd = os.open("/usr/bin/python3", os.O_RDONLY)
outcome, err = attempt_all([
    (sys_call, 175, image, 64, b""),  # init_module
    (sys_call, 313, fd, b"", 0),  # finit_module
    (sys_call, 176, b"loop", 0),  # delete_module
    (sys_call, 246, 0, 0, 0, 0),  # kexec_load
    (sys_call, 320, fd, fd, 0, b"", 0),  # kexec_file_load
    (sys_call, 169, 0xFEE1DEAD, 672274793, 0x4321FEDC, 0),  # reboot(POWER_OFF)
])
report(outcome, err, control=control_tmp_file())
