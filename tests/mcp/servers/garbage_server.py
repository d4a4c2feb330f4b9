"""A hand-written stdio 'MCP server' (stdlib only) that answers the handshake correctly and then
returns results that break the protocol: `tools/call` of `broken` answers a result whose content
is not a list, and `noise` answers a line that is not JSON at all."""

from __future__ import annotations

import json
import sys


def reply(message_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "broken", "description": "Answers a malformed result.", "inputSchema": {"type": "object"}},
    {"name": "noise", "description": "Answers a line that is not JSON.", "inputSchema": {"type": "object"}},
]

for line in sys.stdin:
    request = json.loads(line)
    method, message_id = request.get("method"), request.get("id")
    if message_id is None:
        continue  # notifications
    if method == "initialize":
        version = request["params"]["protocolVersion"]
        info = {"name": "garbage", "version": "0"}
        reply(message_id, {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info})
    elif method == "tools/list":
        reply(message_id, {"tools": TOOLS})
    elif method == "tools/call" and request["params"]["name"] == "broken":
        reply(message_id, {"content": 5, "isError": "maybe"})
    elif method == "tools/call":
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
    else:
        sys.stdout.write(
            json.dumps({"jsonrpc": "2.0", "id": message_id, "error": {"code": -32601, "message": "no"}})
            + "\n"
        )
        sys.stdout.flush()
