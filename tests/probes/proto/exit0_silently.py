# PROTO: exit with status 0 at once, without a done line (the descriptors stay open until
# the kernel closes them).
os._exit(0)
