"""MCP server settings from the ACP `mcpServers` params, as our own frozen records.

`parse_servers` checks the ACP shapes (McpServerStdio / McpServerHttp / McpServerSse) and raises
`McpConfigError` (a ValueError) naming the entry and field; nothing of the wire types leaks further.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

DEFAULT_CALL_TIMEOUT = 60.0

log = logging.getLogger(__name__)


class McpConfigError(ValueError):
    """An `mcpServers` entry that does not have the ACP shape; `loc` is the path to the bad field."""

    def __init__(self, message: str, loc: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.loc = loc


@dataclass(frozen=True)
class StdioServer:
    """An MCP server the session starts as a process (stdio transport)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    # For this server only: never merged into the kernel's environment.
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    transport: Literal["stdio"] = "stdio"


@dataclass(frozen=True)
class HttpServer:
    """An MCP server reached over HTTP or SSE."""

    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    transport: Literal["http", "sse"] = "http"


ServerConfig = StdioServer | HttpServer


def _pairs(raw: Any, loc: tuple[str | int, ...], what: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise McpConfigError(f"{what} must be a list of {{name, value}} objects", loc)
    pairs: list[tuple[str, str]] = []
    for index, item in enumerate(raw):
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise McpConfigError(
                f"{what}[{index}] must be an object with string name and value", (*loc, index)
            )
        pairs.append((item["name"], item["value"]))
    return tuple(pairs)


def parse_server(raw: Any, index: int = 0) -> ServerConfig:
    """One ACP `McpServer` object as a record."""
    loc: tuple[str | int, ...] = ("mcpServers", index)
    if not isinstance(raw, Mapping):
        raise McpConfigError("each MCP server must be an object", loc)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise McpConfigError("an MCP server needs a non-empty string name", (*loc, "name"))
    kind = raw.get("type", "stdio")
    if kind in ("http", "sse"):
        url = raw.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise McpConfigError(f"MCP server {name!r}: url must be an http(s) URL", (*loc, "url"))
        headers = _pairs(raw.get("headers"), (*loc, "headers"), "headers")
        return HttpServer(name=name, url=url, headers=headers, transport=kind)
    if kind != "stdio":
        raise McpConfigError(
            f"MCP server {name!r}: unknown type {kind!r} (stdio, http or sse)", (*loc, "type")
        )
    command = raw.get("command")
    if not isinstance(command, str) or not command:
        raise McpConfigError(f"MCP server {name!r}: command must be a non-empty string", (*loc, "command"))
    args = raw.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"MCP server {name!r}: args must be a list of strings", (*loc, "args"))
    env = _pairs(raw.get("env"), (*loc, "env"), "env")
    return StdioServer(name=name, command=command, args=tuple(args), env=env)


def parse_servers(raw: Any) -> tuple[ServerConfig, ...]:
    """The `mcpServers` list (None = none) as records; duplicate names are refused."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise McpConfigError("mcpServers must be a list", ("mcpServers",))
    servers = tuple(parse_server(item, index) for index, item in enumerate(raw))
    seen: set[str] = set()
    for index, server in enumerate(servers):
        if server.name in seen:
            raise McpConfigError(f"two MCP servers are named {server.name!r}", ("mcpServers", index, "name"))
        seen.add(server.name)
    return servers


def call_timeout(extra: Mapping[str, Any]) -> float:
    """`mcp_call_timeout` from config.toml (seconds), default 60. `load_config` refuses a bad value at
    start, naming the key; here it raises the same `ConfigError`."""
    from agent_core.config.table import value

    return float(value(extra, "mcp_call_timeout"))
