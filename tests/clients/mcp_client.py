"""A real MCP client (the Python SDK 2.x) for the end-to-end tests.

Usage: python mcp_client.py CODE -- SERVE_COMMAND...
Starts SERVE_COMMAND over stdio, lists the tools, calls run_python once with CODE and
prints one JSON line: {"tools": [names], "text": <text content>, "structured": <structuredContent>,
"is_error": bool, "description": <run_python's description>}.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    sep = sys.argv.index("--")
    codes = sys.argv[1:sep]
    command = sys.argv[sep + 1:]
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            tools = [t.name for t in listed.tools]
            calls = []
            for code in codes:
                result = await session.call_tool("run_python", {"code": code})
                calls.append({
                    "text": "".join(getattr(c, "text", "") for c in result.content),
                    "structured": result.structured_content,
                    "is_error": bool(result.is_error),
                })
            print(json.dumps({
                "tools": tools,
                "description": listed.tools[0].description if listed.tools else None,
                "calls": calls,
            }))


asyncio.run(main())
