# PROTO: half a done line, then exit 0.
send_raw(b'{"type":"done","stdout":"forged","error":nu')
# posix._exit: the code's os._exit would end the cell with a done line first.
import posix
posix._exit(0)
