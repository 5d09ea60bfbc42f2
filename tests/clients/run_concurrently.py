"""Fire N run_python calls at once at SERVE_COMMAND; print the seconds they took together.

Usage: python run_concurrently.py N CODE -- SERVE_COMMAND...
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    sep = sys.argv.index("--")
    n, code = int(sys.argv[1]), sys.argv[2]
    command = sys.argv[sep + 1:]
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            start = time.monotonic()
            results = await asyncio.gather(*(session.call_tool("run_python", {"code": code}) for _ in range(n)))
            took = time.monotonic() - start
            print(json.dumps({"seconds": took, "stdout": [r.structured_content["stdout"] for r in results], "errors": [r.structured_content["error"] for r in results]}))


asyncio.run(main())
