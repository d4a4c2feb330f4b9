"""`mcp`: the editor's MCP servers as Python, with tools looked up when needed.

    mcp.servers()                                   # [{name, attr, state, tools, error}, ...]
    await mcp.tools()                               # every tool: server, name, call, description
    await mcp.tools("github", query="issue", schemas=True)   # one server, filtered, with input schemas
    await mcp.github.create_issue(title="...", body="...")   # attribute access (dir(mcp.github))
    await mcp.call("github", "create_issue", title="...")    # the same by name
    await mcp.resources("docs"); await mcp.read("docs", "file:///readme.md")
    await mcp.prompts("docs"); await mcp.prompt("docs", "summarize", topic="x")

Results: structured content as dicts (a value the server wrapped as {"result": x} comes back as x),
text as str, images displayed in the cell. Failures raise `McpError` subclasses carrying the
server's message: `McpToolError` (the tool or server reported an error), `McpTimeoutError`,
`McpServerError` (not running), `McpPermissionDenied`, `McpNotFound`.

A call starts at once (even without `await`) in a worker thread, so several calls can be awaited
together with `asyncio.gather`; `.result()` waits without `await`.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import concurrent.futures
import threading
from collections.abc import Callable, Generator
from typing import Any

from kernel_bridge import hostclient as bridge

__all__ = [
    "McpError",
    "McpNotFound",
    "McpPermissionDenied",
    "McpServerError",
    "McpTimeoutError",
    "McpToolError",
    "call",
    "prompt",
    "prompts",
    "read",
    "resources",
    "server",
    "servers",
    "tools",
]


class McpError(Exception):
    """An MCP operation failed; the message is the server's (or says why there was no answer)."""


class McpToolError(McpError):
    """The tool answered with an error (isError) or the server answered with a protocol error."""


class McpTimeoutError(McpError, TimeoutError):
    """No answer within the per-call timeout (`mcp_call_timeout` in config.toml)."""


class McpServerError(McpError):
    """The server is not running (failed to start, crashed, still connecting)."""


class McpPermissionDenied(McpError, PermissionError):
    """The user did not allow a tool its server marks destructive."""


class McpNotFound(McpError, LookupError):
    """No such server or tool."""


_ERRORS: dict[str, type[McpError]] = {
    "tool_error": McpToolError,
    "timeout": McpTimeoutError,
    "unavailable": McpServerError,
    "denied": McpPermissionDenied,
    "not_found": McpNotFound,
}


def _host(op: str, **args: Any) -> Any:
    try:
        answer = bridge.call(op, **args)
    except bridge.HostError as exc:
        raise McpError(str(exc)) from None
    if not answer.get("ok"):
        error = answer.get("error") or {}
        kind, message = error.get("kind"), str(error.get("message", "MCP operation failed"))
        if kind == "usage":
            raise TypeError(message)
        raise _ERRORS.get(str(kind), McpError)(message)
    return answer.get("result")


_executor_lock = threading.Lock()
_executor: concurrent.futures.ThreadPoolExecutor | None = None


def _submit(op: str, args: dict[str, Any]) -> concurrent.futures.Future[Any]:
    global _executor
    with _executor_lock:
        if _executor is None:
            # Threads keep their bridge connection, so repeated calls skip the connect.
            _executor = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="mcp-call")
        return _executor.submit(lambda: _host(op, **args))


class McpCall:
    """A call in flight: `await` it (or `.result()`) for the value; it runs even if never awaited."""

    _UNSET = object()

    def __init__(self, label: str, future: concurrent.futures.Future[Any], convert: Callable[[Any], Any]):
        self._label = label
        self._future = future
        self._convert = convert
        self._value: Any = McpCall._UNSET

    def _finish(self, raw: Any) -> Any:
        if self._value is McpCall._UNSET:
            self._value = self._convert(raw)  # once: images are displayed one time
        return self._value

    def __await__(self) -> Generator[Any, None, Any]:
        raw = yield from asyncio.wrap_future(self._future).__await__()
        return self._finish(raw)

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the value without `await`."""
        return self._finish(self._future.result(timeout))

    def done(self) -> bool:
        return self._future.done()

    def __repr__(self) -> str:
        state = "done" if self._future.done() else "running"
        return f"<mcp call {self._label} ({state}); `await` it for the result>"


def _display_image(block: dict[str, Any]) -> None:
    try:
        from IPython.display import Image, display

        mime = str(block.get("mimeType") or "image/png")
        image = Image(data=base64.b64decode(block.get("data", "")), format=mime.partition("/")[2] or "png")  # type: ignore[no-untyped-call]
        display(image)  # type: ignore[no-untyped-call]
    except Exception as exc:  # an undecodable image must not lose the rest of the result
        print(f"[mcp: could not display an image: {exc}]")


def _tool_value(result: dict[str, Any]) -> Any:
    texts: builtins.list[str] = []
    for block in result.get("content") or ():
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image":
            _display_image(block)
        elif kind == "resource":
            resource = block.get("resource") or {}
            if "text" in resource:
                texts.append(str(resource["text"]))
        elif kind == "resource_link":
            texts.append(str(block.get("uri", "")))
    if "value" in result:
        return result["value"]
    if texts:
        return "\n".join(texts)
    return None


def call(server: str, tool: str, /, **arguments: Any) -> McpCall:
    """Call `tool` on `server` with keyword arguments; await the returned call for the value."""
    args = {"server": server, "tool": tool, "arguments": arguments}
    return McpCall(f"{server}.{tool}", _submit("mcp.call", args), _tool_value)


def servers() -> builtins.list[dict[str, Any]]:
    """Each server: name, attr (`mcp.<attr>`), transport, state, tool count, last error."""
    return builtins.list(_host("mcp.servers"))


class _Listing(builtins.list):  # type: ignore[type-arg]
    """A list that may also be awaited (the answer is already there)."""

    def __await__(self) -> Generator[Any, None, _Listing]:
        yield from ()
        return self


def tools(server: str | None = None, query: str | None = None, schemas: bool = False) -> _Listing:
    """Tools (one server or all): server, name, call, one-line description; `schemas=True` adds input schemas."""
    return _Listing(_host("mcp.tools", server=server, query=query, schemas=schemas))


def resources(server: str) -> _Listing:
    """The server's resources (uri, name, description, mimeType)."""
    return _Listing(_host("mcp.resources", server=server))


def _contents_value(contents: builtins.list[dict[str, Any]]) -> Any:
    values: builtins.list[Any] = []
    for item in contents:
        if "text" in item:
            values.append(str(item["text"]))
        elif "blob" in item:
            values.append(base64.b64decode(item["blob"]))
    return values[0] if len(values) == 1 else values


def read(server: str, uri: str) -> McpCall:
    """Read a resource: its text (str) or bytes; a list when it has several parts."""
    return McpCall(f"{server} {uri}", _submit("mcp.read", {"server": server, "uri": uri}), _contents_value)


def prompts(server: str) -> _Listing:
    """The server's prompts (name, description, arguments)."""
    return _Listing(_host("mcp.prompts", server=server))


def prompt(server: str, name: str, /, **arguments: Any) -> McpCall:
    """Get a prompt: its messages as dicts (role, content)."""
    args = {"server": server, "name": name, "arguments": arguments}
    return McpCall(f"{server} prompt {name}", _submit("mcp.prompt", args), lambda r: r.get("messages", []))


class _Tool:
    def __init__(self, server: str, spec: dict[str, Any]) -> None:
        self._server = server
        self._name = str(spec["name"])
        self.__doc__ = spec.get("description") or ""

    def __call__(self, **arguments: Any) -> McpCall:
        return call(self._server, self._name, **arguments)

    def __repr__(self) -> str:
        return f"<MCP tool {self._server}.{self._name}: {self.__doc__}>"


class _Server:
    """`mcp.<server>`: its tools as attributes (`dir()` lists them)."""

    def __init__(self, info: dict[str, Any]) -> None:
        self._name = str(info["name"])
        self._info = info

    def _tools(self) -> dict[str, dict[str, Any]]:
        listing = _host("mcp.tools", server=self._name)
        return {str(t["call"]).rpartition(".")[2]: t for t in listing}

    def __getattr__(self, attr: str) -> _Tool:
        if attr.startswith("_"):
            raise AttributeError(attr)
        found = self._tools().get(attr)
        if found is None:
            raise AttributeError(f"MCP server {self._name!r} has no tool {attr!r}; dir() lists them")
        return _Tool(self._name, found)

    def __dir__(self) -> builtins.list[str]:
        return sorted(self._tools())

    def __repr__(self) -> str:
        info = self._info
        return f"<MCP server {self._name} ({info.get('state')}, {info.get('tools')} tools); dir() lists them>"


def server(name: str) -> _Server:
    """A server by its name (for names that are not identifiers or clash with these functions)."""
    for info in servers():
        if name in (info["name"], info["attr"]):
            return _Server(info)
    known = ", ".join(info["name"] for info in servers()) or "none"
    raise McpNotFound(f"no MCP server {name!r} (servers: {known})")


def __getattr__(attr: str) -> _Server:
    if attr.startswith("_"):
        raise AttributeError(attr)
    try:
        listing = servers()
    except McpError as exc:
        raise AttributeError(f"mcp.{attr}: {exc}") from None
    for info in listing:
        if info["attr"] == attr:
            return _Server(info)
    known = ", ".join(info["attr"] for info in listing) or "none in this session"
    raise AttributeError(f"no MCP server {attr!r} (servers: {known})")


def __dir__() -> builtins.list[str]:
    try:
        names = [info["attr"] for info in servers()]
    except McpError:
        names = []
    return sorted({*__all__, *names})
