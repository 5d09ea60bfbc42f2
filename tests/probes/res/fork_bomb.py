# RES: a fork bomb: every process forks forever. Each names itself HOST["marker"], so the
# test can tell that none outlives the run. Ends by the pids limit and the deadline.
libc.prctl(15, HOST["marker"].encode(), 0, 0, 0)  # PR_SET_NAME (in forked children too)
while True:
    try:
        os.fork()
    except OSError:
        pass
