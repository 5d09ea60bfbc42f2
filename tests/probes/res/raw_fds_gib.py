# RES: 1 GiB each to descriptors 1 and 2 (past sys.stdout), and from a subprocess to its
# inherited 1 and 2. They are /dev/null: nothing reaches the host (the test checks what
# exec printed).
chunk = b"x" * (1 << 20)
for fd in (1, 2):
    for _ in range(1024):
        os.write(fd, chunk)
code = "import os\nfor _ in range(1024):\n    os.write(1, b'y' * (1 << 20)); os.write(2, b'z' * (1 << 20))"
status = subprocess.run([PYTHON, "-I", "-S", "-c", code]).returncode
null = all(os.readlink("/proc/self/fd/%d" % fd) == "/dev/null" for fd in (0, 1, 2))
report("denied" if null else "allowed", None, control=check("child ran", status == 0))
