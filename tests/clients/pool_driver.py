"""A real MCP client (the Python SDK 2.x) driven line by line, for the warm-pool tests.

Usage: python pool_driver.py LOG_FILE -- SERVE_COMMAND...
Starts SERVE_COMMAND over stdio (its stderr, the serve log, goes to LOG_FILE), prints
{"ready": true} once the session is up, then for each line of stdin that holds a JSON
string (the code) calls run_python with it and prints one JSON line:
{"structured": <structuredContent>, "is_error": bool, "meta": <_meta>, "text": <text>}.
Ends at EOF on stdin.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def say(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def main() -> None:
    sep = sys.argv.index("--")
    log = open(sys.argv[1], "a", buffering=1)
    command = sys.argv[sep + 1:]
    params = StdioServerParameters(command=command[0], args=command[1:])
    loop = asyncio.get_running_loop()
    async with stdio_client(params, errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            say({"ready": True})
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                if not line:
                    break
                result = await session.call_tool("run_python", {"code": json.loads(line)})
                say({
                    "structured": result.structured_content,
                    "is_error": bool(result.is_error),
                    "meta": result.meta,
                    "text": "".join(getattr(c, "text", "") for c in result.content),
                })


asyncio.run(main())
