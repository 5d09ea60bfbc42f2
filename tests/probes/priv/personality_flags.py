# PRIV: personality(2) other than the query: READ_IMPLIES_EXEC (every readable page
# executable), ADDR_NO_RANDOMIZE, PER_LINUX32, PER_LINUX (0), and with high bits.
SYS_personality = 135
values = [0x0400000, 0x0040000, 0x0008, 0, 0x0400000 | 1 << 32]
outcome, err = attempt_all([(sys_call, SYS_personality, v) for v in values])
query = sys_call(SYS_personality, 0xFFFFFFFF)
report(outcome, err, control=check("the query works", query & 0x0400000 == 0))
