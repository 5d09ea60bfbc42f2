# PROTO: bytes without a newline, forever (the host must not buffer them without bound).
chunk = b"x" * (1 << 20)
while True:
    send_raw(chunk)
