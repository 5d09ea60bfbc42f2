# PROTO: half a done line, then exit 0.
send_raw(b'{"type":"done","stdout":"forged","error":nu')
os._exit(0)
