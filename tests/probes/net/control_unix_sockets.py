# NET, positive control: UNIX sockets inside the sandbox work (pathname in /tmp, abstract,
# socketpair), and asyncio's loop (a socketpair self-pipe) serves them.
import asyncio
import socket

path = "/tmp/probe.sock"
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen()
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.connect(path)
conn, _ = server.accept()
client.sendall(b"ping")
pathname = conn.recv(4) == b"ping"

abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
abstract.bind("\0probe-%d" % os.getpid())
abstract.listen()
peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
peer.connect("\0probe-%d" % os.getpid())
inner_abstract = abstract.accept()[0] is not None


async def echo():
    r, w = await asyncio.open_unix_connection(sock=socket.socketpair()[0])
    w.close()
    return True


looped = await echo()
ok = pathname and inner_abstract and looped
report("allowed" if ok else "denied", None, control=check("unix sockets", ok))
