"""A Streamable-HTTP "MCP server" that replays a scenario, for the lenient-parsing tests of
remote servers. Standard library only.

It uses no MCP SDK on purpose: it sends what the scenario says, fields of the wrong type
and all, which an SDK would refuse to write. The scenario is the one `scripted_server`
(examples/scripted_server.rs) reads, and only its `tools` and its `reply`, `error` and `raw`
steps are used: `on` keyed `"tools/call:NAME"`, then by method; a request with no entry gets
the default answer (initialize echoes the client's version, tools/list sends `tools`, ping
`{}`, anything else "method not found").

Usage: scripted_http_server.py SCENARIO.json MODE, MODE `json` (each answer is an
application/json body) or `sse` (each answer is one event of a text/event-stream body).
It listens on 127.0.0.1 on a free port and prints the port as its first line.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

scenario = json.load(open(sys.argv[1]))
mode = sys.argv[2]
SESSION = "scripted-session-1"


def answer(request):
    """The body of the answer to one JSON-RPC request, as text."""
    method = request.get("method", "")
    name = (request.get("params") or {}).get("name", "")
    steps = scenario.get("on", {}).get(f"{method}:{name}") or scenario.get("on", {}).get(method)
    rid = request.get("id")
    for step in steps or []:
        if "raw" in step:
            return step["raw"].replace("$ID", json.dumps(rid))
        if "error" in step:
            return json.dumps({"jsonrpc": "2.0", "id": rid, "error": step["error"]})
        if "reply" in step:
            return json.dumps({"jsonrpc": "2.0", "id": rid, "result": step["reply"]})
    if method == "initialize":
        version = request["params"].get("protocolVersion", "2025-06-18")
        result = {"protocolVersion": version, "capabilities": {"tools": {}},
                  "serverInfo": {"name": "scripted-http", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": scenario.get("tools", [])}
    elif method == "ping":
        result = {}
    else:
        return json.dumps({"jsonrpc": "2.0", "id": rid,
                           "error": {"code": -32601, "message": "method not found"}})
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", content_type=None):
        self.send_response(status)
        self.send_header("Mcp-Session-Id", SESSION)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        message = json.loads(self.rfile.read(length))
        if "method" not in message or "id" not in message:
            self.send(202)
            return
        text = answer(message)
        if mode == "sse":
            self.send(200, f"event: message\ndata: {text}\n\n".encode(), "text/event-stream")
        else:
            self.send(200, text.encode(), "application/json")

    def do_GET(self):
        self.send(405)

    def do_DELETE(self):
        self.send(200)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
