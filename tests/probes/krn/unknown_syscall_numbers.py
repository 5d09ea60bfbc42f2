# KRN: syscall numbers the kernel does not have, or has but the policy does not know:
# the unassigned gap (335 and 336 are uretprobe and uprobe: krn/uprobe_syscalls), numbers
# added after the policy was written (463+), and past the table. The native filter answers
# its default errno; Docker's runc answers ENOSYS above the profile's highest number.
numbers = [400, 423, 463, 470, 500, 1000, 4095, 0x1000_0000, 0x3FFF_FFFF]
outcome, err = attempt_all([(sys_call, n, 0, 0, 0) for n in numbers])
report(outcome, err, control=check("getpid", sys_call(39) == os.getpid()))
