# PROTO: a forged, well-formed call to a tool that does not exist: the host refuses it (the
# server never sees it) and the run goes on. The toy's calls tool counts what reached the
# server: only its own call.
import asyncio
import json

send_raw((json.dumps({"type": "call", "id": 9_000_000_000, "tool": "shutdown", "args": {}}) + "\n").encode())
await asyncio.sleep(0.5)
seen = await calls({})
report("denied" if seen == "1" else "allowed", None, server_saw=seen, control=check("a real call works", seen.isdigit()))
