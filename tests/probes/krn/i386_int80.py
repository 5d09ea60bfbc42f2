# KRN: a 32-bit syscall through int 0x80 (the i386 ABI, another audit arch) kills the
# process. In a child that maps a few bytes of machine code: mov eax, 20 (getpid); int 0x80; ret.
code = r"""
import mmap
text = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(text)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
ctypes.CFUNCTYPE(ctypes.c_int)(address)()
print("survived")
"""
status, out = run_child(code)
if status < 0:
    outcome, err = "killed", _signal.Signals(-status).name
elif "survived" in out:
    outcome, err = "allowed", "int 0x80 returned"
else:
    outcome, err = "denied", "exit %d" % status
report(outcome, err, control=control_subprocess())
