"""A Python SDK 2.x client that answers approval requests (elicitation), for the tests.

Usage: python approving_client.py MODE CODE -- SERVE_COMMAND...
MODE is accept, decline or cancel (the answer to every elicitation/create); wait: never
answer, until the server withdraws the request (notifications/cancelled) or 60 s pass; or
none: no elicitation callback, so the client does not declare the elicitation capability.
Prints one JSON line: {"description": run_python's description, "text": the result's text,
"structured": its structuredContent, "is_error": bool, "asked": [{"message", "schema"}],
"withdrawn": whether a request was withdrawn while the client waited}.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


async def main() -> None:
    mode = sys.argv[1]
    code = sys.argv[2]
    sep = sys.argv.index("--")
    command = sys.argv[sep + 1:]
    asked = []
    withdrawn = asyncio.Event()

    async def on_elicit(context, params):
        asked.append({
            "message": params.message,
            "schema": params.requested_schema if hasattr(params, "requested_schema") else None,
        })
        if mode == "wait":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                withdrawn.set()
                raise
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action=mode)

    callback = None if mode == "none" else on_elicit
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            await session.initialize()
            listed = await session.list_tools()
            result = await session.call_tool("run_python", {"code": code})
            if mode == "wait" and asked:
                # The withdrawal and the result travel separately; give the first a moment.
                try:
                    await asyncio.wait_for(withdrawn.wait(), 5)
                except asyncio.TimeoutError:
                    pass
            print(json.dumps({
                "description": listed.tools[0].description,
                "text": "".join(getattr(c, "text", "") for c in result.content),
                "structured": result.structured_content,
                "is_error": bool(result.is_error),
                "asked": asked,
                "withdrawn": withdrawn.is_set(),
            }, default=str))


asyncio.run(main())
