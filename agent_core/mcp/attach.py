"""MCP for one `Session`: its registry, the kernel's host ops, permission asks, and stop on close.

`attach_mcp(session, servers)` is called by the agent when a session is created or reopened
(`session.mcp` is the registry afterwards); `configure_mcp` changes the servers of an open session
(a `session/load` or `session/resume` of a session already open in this process).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent_core import events as ev
from agent_core.bus import Closing, KernelReady
from agent_core.mcp import host_ops
from agent_core.mcp.config import ServerConfig, call_timeout
from agent_core.mcp.records import McpNotice
from agent_core.mcp.registry import McpRegistry

if TYPE_CHECKING:
    from agent_core.session import Session


def _call_text(server: str, tool: str, arguments: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)[:400]}" for k, v in arguments.items())
    return f"await mcp.call({server!r}, {tool!r}{', ' if args else ''}{args})"


# Keeps notice tasks alive until they ran (the loop holds only weak references to tasks).
_NOTICE_TASKS: set[asyncio.Task[None]] = set()


def attach_mcp(session: Session, servers: Sequence[ServerConfig] = (), *, start: bool = True) -> McpRegistry:
    """Give `session` an MCP registry of `servers`; they connect in the background, now or (with
    `start=False`) on `session.mcp.start()` or their first use."""
    from agent_core.ports import PermissionRequest

    async def ask(server: str, tool: str, arguments: dict[str, Any]) -> str:
        # A card of its own, shown while the cell waits; its id never collides with a cell's.
        request = PermissionRequest(
            cell_id=f"mcp_{uuid.uuid4().hex[:16]}",
            title=f"MCP tool {server}.{tool} (its server marks it destructive)",
            code=_call_text(server, tool, arguments),
        )
        decision = str(await session.editor.request_permission(request))
        allowed = decision in ("allow_once", "allow_always")
        session.emit_into_turn(
            ev.CellFinished(
                request.cell_id,
                "completed" if allowed else "cancelled",
                error=None if allowed else "not allowed by the user",
                output="allowed" if allowed else "",
            )
        )
        return decision

    registry = McpRegistry(
        cwd=str(session.cwd),
        call_timeout=call_timeout(session.agent_config.extra),
        ask_permission=ask,
        bus=session.bus,
    )
    session.mcp = registry

    def tell_user(notice: McpNotice) -> None:
        # A failed, crashed, hung or garbled server is something the user should know but that is not
        # part of the answer: an ACP `notice` where the client shows them, else an agent message.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(
            session.notify_user(notice.level, f"MCP server {notice.server}: {notice.message}")
        )
        _NOTICE_TASKS.add(task)
        task.add_done_callback(_NOTICE_TASKS.discard)

    session.bus.subscribe(McpNotice, tell_user)
    session.bus.subscribe(KernelReady, lambda ready: host_ops.register(ready.kernel.host_bridge, registry))
    session.bus.subscribe(Closing, lambda _: registry.aclose())
    registry.configure(servers, start=start)
    return registry


def configure_mcp(session: Session, servers: Sequence[ServerConfig] | None, *, start: bool = True) -> None:
    """New servers for an open session (None = leave them as they are)."""
    registry = session.mcp
    if servers is None:
        return
    if registry is None:
        attach_mcp(session, servers, start=start)
    else:
        registry.configure(servers, start=start)
