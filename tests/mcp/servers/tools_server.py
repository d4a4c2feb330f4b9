"""A real MCP server for the tests, on the SDK's server side (MCPServer, formerly FastMCP).

    python tools_server.py                 # stdio
    python tools_server.py --http PORT     # streamable HTTP on 127.0.0.1:PORT/mcp
    python tools_server.py --sse PORT      # SSE on 127.0.0.1:PORT/sse

MCP_TEST_PID_FILE (if set) receives this process's pid at startup, so tests can check it is gone.
"""

from __future__ import annotations

import base64
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations

# 1x1 red PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

server = MCPServer("tools-under-test")


@server.tool(description="Add two integers.\nSecond line of the description.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Facts about a name as an object.")
def describe(name: str, times: int = 1) -> dict[str, object]:
    return {"name": name, "length": len(name), "repeated": name * times}


@server.tool(description="Echo text back, unstructured.", structured_output=False)
def echo(text: str) -> str:
    return text


@server.tool(description="A tiny PNG image.")
def picture() -> Image:
    return Image(data=PNG, format="png")


@server.tool(
    name="delete-file",
    description="Pretend to delete a file.",
    annotations=ToolAnnotations(destructiveHint=True),
)
def delete_file(path: str) -> str:
    return f"deleted {path}"


@server.tool(description="Always fails with the given message.")
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(description="The value of an environment variable in this server.")
def env_value(name: str) -> str:
    return os.environ.get(name, "<unset>")


@server.tool(description="This server's process id.")
def pid() -> int:
    return os.getpid()


@server.tool(description="Exit the server process in the middle of the call.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Never answers.")
async def hang() -> str:
    await anyio.sleep(3600)
    return "unreachable"


def extra(word: str) -> str:
    """A tool added while the server runs."""
    return word.upper()


@server.tool(description="Add the `extra` tool and tell the client the tool list changed.")
async def grow(ctx: Context) -> str:
    server.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.resource("note://readme", description="A short note.")
def readme() -> str:
    return "hello from a resource"


@server.prompt(description="Ask for a review of a topic.")
def review(topic: str) -> str:
    return f"Please review {topic}."


def main() -> None:
    pid_file = os.environ.get("MCP_TEST_PID_FILE")
    if pid_file:
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()


if __name__ == "__main__":
    main()
