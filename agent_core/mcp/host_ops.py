"""Host-bridge handlers behind the kernel's `mcp` object (`mcp.servers`, `mcp.tools`, `mcp.call`, ...).

Every handler answers `{"ok": true, "result": ...}` or `{"ok": false, "error": {"kind", "message"}}`
so the kernel can raise the right exception (McpToolError, McpTimeoutError, ...) with the server's
own message, not the bridge's generic wrapping. Bad arguments from the cell are `usage` errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_core.mcp.records import McpOpError
from agent_core.mcp.registry import McpRegistry

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


def _text(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise McpOpError("usage", f"`{key}` must be a non-empty string")
    return value


def _dict(args: dict[str, Any], key: str) -> dict[str, Any]:
    value = args.get(key) or {}
    if not isinstance(value, dict):
        raise McpOpError("usage", f"`{key}` must be a dict")
    return value


def handlers(registry: McpRegistry) -> dict[str, Handler]:
    """op name -> handler bound to this session's registry."""

    async def servers(args: dict[str, Any]) -> Any:
        return registry.servers()

    async def tools(args: dict[str, Any]) -> Any:
        server, query = args.get("server"), args.get("query")
        if server is not None and not isinstance(server, str):
            raise McpOpError("usage", "`server` must be a server name or None")
        if query is not None and not isinstance(query, str):
            raise McpOpError("usage", "`query` must be a string or None")
        return await registry.tools(server, query, bool(args.get("schemas")))

    async def call(args: dict[str, Any]) -> Any:
        return await registry.call(_text(args, "server"), _text(args, "tool"), _dict(args, "arguments"))

    async def resources(args: dict[str, Any]) -> Any:
        return await registry.resources(_text(args, "server"))

    async def read(args: dict[str, Any]) -> Any:
        return await registry.read(_text(args, "server"), _text(args, "uri"))

    async def prompts(args: dict[str, Any]) -> Any:
        return await registry.prompts(_text(args, "server"))

    async def prompt(args: dict[str, Any]) -> Any:
        arguments = {str(k): str(v) for k, v in _dict(args, "arguments").items()}
        return await registry.prompt(_text(args, "server"), _text(args, "name"), arguments)

    table = {
        "mcp.servers": servers,
        "mcp.tools": tools,
        "mcp.call": call,
        "mcp.resources": resources,
        "mcp.read": read,
        "mcp.prompts": prompts,
        "mcp.prompt": prompt,
    }
    return {op: _answering(handler) for op, handler in table.items()}


def _answering(handler: Handler) -> Handler:
    async def answer(args: dict[str, Any]) -> Any:
        try:
            return {"ok": True, "result": await handler(args)}
        except McpOpError as exc:
            return {"ok": False, "error": {"kind": exc.kind, "message": exc.message}}

    return answer


def register(bridge: Any, registry: McpRegistry) -> None:
    """Register the `mcp.*` ops on a session's host bridge."""
    for op, handler in handlers(registry).items():
        bridge.register(op, handler)
