"""The `/mcp` slash command as text (acp_server wires it; see agent_core/mcp/README.md).

/mcp                  server states, tool counts, last errors, recent notices
/mcp restart <name>   restart one server
"""

from __future__ import annotations

from agent_core.mcp.records import McpOpError
from agent_core.mcp.registry import McpRegistry

USAGE = "Usage: `/mcp` (server states) or `/mcp restart <name>`."


def status_text(registry: McpRegistry | None) -> str:
    """Markdown: one line per server, then the last few notices."""
    if registry is None or not registry.connections:
        return "No MCP servers are configured for this session (the editor passes them in `session/new`)."
    lines = ["MCP servers:"]
    for server in registry.servers():
        line = f"- `{server['name']}` ({server['transport']}): {server['state']}, {server['tools']} tools"
        if server["error"]:
            line += f" — last error: {server['error']}"
        lines.append(line)
    if registry.notices:
        lines.append("")
        lines.append("Recent notices:")
        lines.extend(f"- {notice.message}" for notice in registry.notices[-5:])
    lines.append("")
    lines.append("`/mcp restart <name>` restarts one; in a cell, `mcp.servers()` and `await mcp.tools()`.")
    return "\n".join(lines)


async def restart_text(registry: McpRegistry | None, name: str) -> str:
    """Restart `name` and wait (bounded) for it to connect; says how that went."""
    if registry is None or not registry.connections:
        return "No MCP servers are configured for this session."
    try:
        connection = await registry.restart(name)
    except McpOpError as exc:
        return exc.message
    try:
        await connection.wait_ready()
    except McpOpError as exc:
        return f"Restarted `{connection.name}`, but it is not usable: {exc.message}"
    return f"Restarted `{connection.name}`: ready, {len(connection.tools)} tools."


async def command_text(registry: McpRegistry | None, argument: str) -> str:
    """`/mcp <argument>`: the whole command as one entry point."""
    words = argument.split()
    if not words:
        return status_text(registry)
    if words[0] == "restart" and len(words) == 2:
        return await restart_text(registry, words[1])
    return USAGE
