"""A Python SDK 2.x client that answers approval requests (elicitation), for the tests.

Usage: python approving_client.py MODE CODE -- SERVE_COMMAND...
MODE is accept, decline or cancel (the answer to every elicitation/create), or none: no
elicitation callback, so the client does not declare the elicitation capability.
Prints one JSON line: {"description": run_python's description, "text": the result's text,
"structured": its structuredContent, "is_error": bool, "asked": [{"message", "schema"}]}.
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

    async def on_elicit(context, params):
        asked.append({
            "message": params.message,
            "schema": params.requested_schema if hasattr(params, "requested_schema") else None,
        })
        return types.ElicitResult(action=mode)

    callback = None if mode == "none" else on_elicit
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            await session.initialize()
            listed = await session.list_tools()
            result = await session.call_tool("run_python", {"code": code})
            print(json.dumps({
                "description": listed.tools[0].description,
                "text": "".join(getattr(c, "text", "") for c in result.content),
                "structured": result.structured_content,
                "is_error": bool(result.is_error),
                "asked": asked,
            }, default=str))


asyncio.run(main())
