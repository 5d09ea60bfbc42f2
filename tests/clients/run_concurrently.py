"""Fire N run_python calls at once at SERVE_COMMAND; print the seconds they took together,
what the runs printed and raised, and the texts of the calls refused before they ran.

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

            async def call():
                result = await session.call_tool("run_python", {"code": code})
                return result, time.monotonic() - start

            timed = await asyncio.gather(*(call() for _ in range(n)))
            took = time.monotonic() - start
            results = [r for r, _ in timed]
            # A call refused before it ran has no structured content: its text says why.
            ran = [r for r in results if r.structured_content is not None]
            refused = [r.content[0].text for r in results if r.structured_content is None]
            print(json.dumps({
                "seconds": took,
                "stdout": [r.structured_content["stdout"] for r in ran],
                "errors": [r.structured_content["error"] for r in ran],
                "refused": refused,
                # Seconds from the first call to each answer.
                "ran_after": [t for r, t in timed if r.structured_content is not None],
                "refused_after": [t for r, t in timed if r.structured_content is None],
            }))


asyncio.run(main())
