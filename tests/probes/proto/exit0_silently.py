# PROTO: exit with status 0 at once, without a done line (the descriptors stay open until
# the kernel closes them).
# posix._exit: the code's os._exit would end the cell with a done line first.
import posix
posix._exit(0)
