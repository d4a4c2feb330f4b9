"""The system prompt's MCP section: servers and tool counts, and how to look tools up (bounded)."""

from __future__ import annotations

from agent_core.mcp.registry import McpRegistry, one_line

MAX_SERVERS_LISTED = 20
MAX_CHARS = 2_000


def prompt_section(registry: McpRegistry | None) -> str:
    """Empty without servers; never grows with the number of tools (they are looked up in the kernel)."""
    if registry is None or not registry.connections:
        return ""
    lines = [
        "# MCP servers",
        "The editor connected these MCP servers; their tools are Python in the kernel's `mcp` object. "
        "Look tools up with `await mcp.tools(server=None, query=None, schemas=False)` and call them as "
        "`await mcp.<server>.<tool>(**arguments)` or `await mcp.call(server, tool, **arguments)`; "
        "`mcp.servers()` shows states. Errors raise `mcp.McpError` subclasses.",
    ]
    servers = registry.servers()
    for server in servers[:MAX_SERVERS_LISTED]:
        state = f"{server['tools']} tools" if server["state"] == "ready" else server["state"]
        if server["state"] == "connecting":
            # The usual state on a session's first turn (servers start after session/new answers).
            state += " (a lookup or call waits for it)"
        line = f"- `mcp.{server['attr']}` ({one_line(server['name'], 60)}): {state}"
        if server["error"]:
            line += f" — {one_line(server['error'], 100)}"
        lines.append(line)
    if len(servers) > MAX_SERVERS_LISTED:
        lines.append(f"- ... and {len(servers) - MAX_SERVERS_LISTED} more (`mcp.servers()` lists all)")
    text = "\n".join(lines)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
