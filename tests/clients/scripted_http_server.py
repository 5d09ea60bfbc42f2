"""A Streamable-HTTP "MCP server" that replays a scenario, for the lenient-parsing tests of
remote servers. Standard library only.

It uses no MCP SDK on purpose: it sends what the scenario says, fields of the wrong type
and all, which an SDK would refuse to write. The scenario is the one `scripted_server`
(examples/scripted_server.rs) reads, and only its `tools` and its `reply`, `error`, `raw`
and `ask` steps are used: `on` keyed `"tools/call:NAME"`, then by method; a request with no
entry gets the default answer (initialize echoes the client's version, tools/list sends
`tools`, ping `{}`, anything else "method not found").

An `ask` step (SSE mode only) sends a request to the client as an event of the response
stream, then waits up to 5 s for the client to POST its answer; `"$ANSWERS"` in a later
`reply` becomes the answers received, in order (`{"unanswered": METHOD}` for one that did
not come). In JSON mode an `ask` is recorded as `{"unasked": METHOD}`.

Usage: scripted_http_server.py SCENARIO.json MODE, MODE `json` (each answer is an
application/json body) or `sse` (each answer is one event of a text/event-stream body).
It listens on 127.0.0.1 on a free port and prints the port as its first line.
"""

import itertools
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

scenario = json.load(open(sys.argv[1]))
mode = sys.argv[2]
SESSION = "scripted-session-1"

received = {}  # id of a request we sent the client -> its answer
received_changed = threading.Condition()
ask_ids = itertools.count(1)


def with_answers(value, answers):
    """`value` with each "$ANSWERS" string replaced by `answers`."""
    if value == "$ANSWERS":
        return answers
    if isinstance(value, dict):
        return {k: with_answers(v, answers) for k, v in value.items()}
    if isinstance(value, list):
        return [with_answers(v, answers) for v in value]
    return value


def answer(request, ask=None):
    """The body of the answer to one JSON-RPC request, as text. `ask(method, params)` sends
    a request to the client and returns its answer (None: this mode cannot ask)."""
    method = request.get("method", "")
    name = (request.get("params") or {}).get("name", "")
    steps = scenario.get("on", {}).get(f"{method}:{name}") or scenario.get("on", {}).get(method)
    rid = request.get("id")
    answers = []
    for step in steps or []:
        if "ask" in step:
            asked = step["ask"]
            got = ask(asked.get("method"), asked.get("params")) if ask else None
            answers.append(got if got is not None else
                           {"unanswered" if ask else "unasked": asked.get("method")})
            continue
        if "raw" in step:
            return step["raw"].replace("$ID", json.dumps(rid))
        if "error" in step:
            return json.dumps({"jsonrpc": "2.0", "id": rid, "error": step["error"]})
        if "reply" in step:
            result = with_answers(step["reply"], answers)
            return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result})
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
            if "method" not in message and "id" in message:  # the client's answer to an ask
                with received_changed:
                    received[json.dumps(message["id"])] = message
                    received_changed.notify_all()
            self.send(202)
            return
        if mode == "sse":
            self.stream(message)
        else:
            self.send(200, answer(message).encode(), "application/json")

    def stream(self, request):
        """The answer as an event stream: each `ask` an event before it, the answer last."""
        self.send_response(200)
        self.send_header("Mcp-Session-Id", SESSION)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(text):
            self.wfile.write(f"event: message\ndata: {text}\n\n".encode())
            self.wfile.flush()

        def ask(method, params):
            rid = f"ask-{next(ask_ids)}"
            asked = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                asked["params"] = params
            event(json.dumps(asked))
            with received_changed:
                received_changed.wait_for(lambda: json.dumps(rid) in received, timeout=5)
                return received.pop(json.dumps(rid), None)

        event(answer(request, ask))

    def do_GET(self):
        self.send(405)

    def do_DELETE(self):
        self.send(200)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
