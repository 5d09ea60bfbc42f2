"""Fire N run_python calls at once at SERVE_COMMAND; print the seconds they took together,
what the runs printed and raised, and the results of the calls refused before they ran.

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
            # A call refused before it ran says so in its error (or, in another shape than a
            # run's result, has no structured content).
            def was_refused(result) -> bool:
                structured = result.structured_content
                return structured is None or "so this run was not started" in (structured.get("error") or "")

            ran = [r for r, _ in timed if not was_refused(r)]
            refused = [r for r, _ in timed if was_refused(r)]
            print(json.dumps({
                "seconds": took,
                "stdout": [r.structured_content["stdout"] for r in ran],
                "errors": [r.structured_content["error"] for r in ran],
                # Each refusal's text block and structured content, and its isError.
                "refused": [
                    {"text": r.content[0].text, "structured": r.structured_content, "isError": r.is_error}
                    for r in refused
                ],
                # Seconds from the first call to each answer.
                "ran_after": [t for r, t in timed if not was_refused(r)],
                "refused_after": [t for r, t in timed if was_refused(r)],
            }))


asyncio.run(main())
