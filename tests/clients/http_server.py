"""A Streamable-HTTP MCP server (Python SDK) on 127.0.0.1, for the remote-server tests.

Usage: http_server.py PORT TOKEN. Every request must carry `Authorization: Bearer TOKEN`,
else it gets 401. Tools: greet(name) -> str (its outputSchema is the single-`result`
wrapper the SDK makes for a non-object return), and add_one(n) -> int.
"""

import sys

import uvicorn
from starlette.responses import JSONResponse

from mcp.server.mcpserver import MCPServer

port, token = int(sys.argv[1]), sys.argv[2]
server = MCPServer("remote-test")


@server.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@server.tool()
def add_one(n: int) -> int:
    """Add one."""
    return n + 1


class Bearer:
    """Refuses every HTTP request without the expected bearer token."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != b"Bearer " + token.encode():
                await JSONResponse({"error": "invalid token"}, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


uvicorn.run(Bearer(server.streamable_http_app()), host="127.0.0.1", port=port, log_level="warning")
