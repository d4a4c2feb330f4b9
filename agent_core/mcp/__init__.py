"""MCP servers of a session, held in the host and reached from the kernel's `mcp` object.

Modules: `config` (ACP params -> records), `names` (identifiers), `records` (errors, notices),
`transports` (the SDK, imported lazily; stdio servers under kernel_bridge's `group_watch`),
`connection` (one server's supervisor task), `registry` (a session's servers), `host_ops` (bridge handlers),
`commands` (`/mcp` text), `prompt` (system prompt section), `attach` (wiring into a session).
Importing this package does not import the SDK.
"""

from __future__ import annotations

from agent_core.mcp.attach import attach_mcp, configure_mcp
from agent_core.mcp.commands import command_text, restart_text, status_text
from agent_core.mcp.config import HttpServer, McpConfigError, ServerConfig, StdioServer, parse_servers
from agent_core.mcp.prompt_section import prompt_section
from agent_core.mcp.records import McpNotice, McpOpError
from agent_core.mcp.registry import McpRegistry

__all__ = [
    "HttpServer",
    "McpConfigError",
    "McpNotice",
    "McpOpError",
    "McpRegistry",
    "ServerConfig",
    "StdioServer",
    "attach_mcp",
    "command_text",
    "configure_mcp",
    "parse_servers",
    "prompt_section",
    "restart_text",
    "status_text",
]
