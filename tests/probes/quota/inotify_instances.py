# QUOTA: inotify instances are a per-user host counter (fs.inotify.max_user_instances, 128):
# 129 instances through both calls. Control: epoll, the notification asyncio uses, works.
import select

SYS_inotify_init, SYS_inotify_init1 = 253, 294
held = []
names = []
for i in range(129):
    for nr, args in ((SYS_inotify_init1, (0o2000000,)), (SYS_inotify_init, ())):
        try:
            held.append(sys_call(nr, *args))
        except OSError as e:
            if ename(e.errno) not in names:
                names.append(ename(e.errno))
for fd in held:
    os.close(fd)
ep = select.epoll()
ep.close()
if held:
    report("allowed", "%d inotify instances" % len(held))
else:
    report("denied", "|".join(sorted(names)), control=check("epoll", ep.closed))
