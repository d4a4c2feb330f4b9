"""Opening one MCP connection with the official SDK (imported lazily: it is a heavy import).

`open_transport(config, errlog)` is an async context manager yielding the SDK's (read, write)
streams. stdio servers start through kernel_bridge's launch seam (`workspace_launch`): scrubbed
environment, no capabilities, under the group watch, which kills their process group if this
process dies.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
from collections.abc import AsyncIterator, Callable
from typing import Any, TextIO

import anyio

from agent_core.mcp.config import HttpServer, ServerConfig, StdioServer
from kernel_bridge import workspace_launch

# The SDK modules each transport needs. They are imported in a worker thread before first use: they
# pull in httpx, cryptography and an SSL context, 2-5 s on the event loop of a loaded machine
# (benchmarks/bench_suite_stalls.py found them as the suite's worst stalls).
_SDK_MODULES = {
    "stdio": ("mcp", "mcp.client.stdio"),
    "sse": ("mcp", "mcp.client.sse"),
    "http": ("mcp", "mcp.client.streamable_http", "mcp.shared._httpx_utils"),
}


def _import_sdk(kind: str) -> None:
    for module in _SDK_MODULES[kind]:
        importlib.import_module(module)


class McpStartError(RuntimeError):
    """A server that cannot be started at all (command not found, bad URL)."""


def _resolve_command(server: StdioServer, env: dict[str, str]) -> str:
    if os.sep in server.command:
        if not os.access(server.command, os.X_OK):
            raise McpStartError(f"command {server.command!r} does not exist or is not executable")
        return server.command
    found = shutil.which(server.command, path=env.get("PATH"))
    if found is None:
        raise McpStartError(f"command {server.command!r} not found on PATH")
    return found


def stdio_parameters(server: StdioServer, cwd: str | None) -> Any:
    """The SDK's StdioServerParameters, under the group watch; env goes to this server only."""
    from mcp.client.stdio import StdioServerParameters, get_default_environment

    # kernel_bridge's launch seam: the SDK's short list of inherited variables (scrubbed) plus the
    # ones configured for this server; run under the group watch (no capabilities, its own group,
    # watching us). The SDK starts it in a new session with only its pipes (close_fds). Not put
    # under the sandbox's confinement: a tool server is the user's, configured by the user, and
    # typically needs the network and its own state.
    env = workspace_launch.workspace_environment(get_default_environment(), extra=dict(server.env))
    launch = workspace_launch.LaunchPolicy(cwd or os.getcwd(), env)
    argv = workspace_launch.launch_argv([_resolve_command(server, env), *server.args], launch)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)


@contextlib.asynccontextmanager
async def open_transport(config: ServerConfig, errlog: TextIO, cwd: str | None = None) -> AsyncIterator[Any]:
    """(read_stream, write_stream) for `config`."""
    kind = "stdio" if isinstance(config, StdioServer) else "sse" if config.transport == "sse" else "http"
    await anyio.to_thread.run_sync(_import_sdk, kind)
    if isinstance(config, StdioServer):
        from mcp.client.stdio import stdio_client

        async with stdio_client(stdio_parameters(config, cwd), errlog=errlog) as streams:
            yield streams[0], streams[1]
        return
    assert isinstance(config, HttpServer)
    headers = dict(config.headers)
    if config.transport == "sse":
        from mcp.client.sse import sse_client

        async with sse_client(config.url, headers=headers or None) as streams:
            yield streams[0], streams[1]
        return
    async with _streamable_http(config.url, headers) as streams:
        yield streams[0], streams[1]


@contextlib.asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with contextlib.AsyncExitStack() as stack:
        # Built in a thread: the client's SSL context loads the CA store (seconds on a loaded machine).
        made = await anyio.to_thread.run_sync(lambda: create_mcp_http_client(headers=headers or None))
        client = await stack.enter_async_context(made)
        streams = await stack.enter_async_context(streamable_http_client(url, http_client=client))
        yield streams


def client_session(
    read: Any, write: Any, on_garbage: Callable[[str], None], on_notification: Callable[[str], None]
) -> Any:
    """The SDK's ClientSession on a transport's streams; `on_garbage(text)` hears of lines the
    transport could not parse (they match no request, so the waiting call would only time out),
    `on_notification(method)` of the server's notifications."""
    from mcp import ClientSession

    async def handle(message: Any) -> None:
        if isinstance(message, Exception):
            on_garbage(error_message(message))
            return
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        if isinstance(method, str):
            on_notification(method)

    return ClientSession(read, write, message_handler=handle)


def error_message(exc: BaseException) -> str:
    """The readable message of an SDK (or transport) error, exception groups unwrapped."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpStartError):
        return str(exc)  # written for the user already
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ == "ValidationError" and callable(errors):
        # pydantic, parsing what the server answered: say which fields were wrong, briefly.
        problems = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errors()[:3]]
        return "the server's answer is not a valid MCP result (" + "; ".join(problems) + ")"
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None)
    if isinstance(message, str) and message:
        return message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def dump(model: Any) -> Any:
    """An SDK result as its wire JSON (camelCase), so the rest of agent_core never sees SDK types."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
