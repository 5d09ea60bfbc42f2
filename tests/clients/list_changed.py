"""The Python SDK 2.x client, told by serve that its tool list changed.

Usage: python list_changed.py CODE -- SERVE_COMMAND...
Starts SERVE_COMMAND over stdio, lists the tools, calls run_python once with CODE (which
makes a wrapped server change its tools), waits up to 20 s for
notifications/tools/list_changed, lists the tools again and prints one JSON line:
{"list_changed_capability": bool, "notified": bool, "before": <description>,
"after": <description>, "text": <run_python's text>}.
"""

import asyncio
import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp import types


async def main() -> None:
    sep = sys.argv.index("--")
    code = sys.argv[1]
    command = sys.argv[sep + 1:]
    params = StdioServerParameters(command=command[0], args=command[1:])
    changed = anyio.Event()

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            tools = init.capabilities.tools
            before = (await session.list_tools()).tools[0].description
            result = await session.call_tool("run_python", {"code": code})
            with anyio.move_on_after(20):
                await changed.wait()
            after = (await session.list_tools()).tools[0].description
            print(json.dumps({
                "list_changed_capability": bool(tools and tools.list_changed),
                "notified": changed.is_set(),
                "before": before,
                "after": after,
                "text": "".join(getattr(c, "text", "") for c in result.content),
            }))


asyncio.run(main())
