"""`/agents` in the editor: the children of a session, and cancelling them. Each returns reply text."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_core.subagents.hub import SubagentHub

USAGE = "Usage: `/agents` lists this session's subagents; `/agents cancel <name>` or `/agents cancel --all` stops them."


NEEDS_ACTION = "waiting for your answer to its permission request"


def _line(record: Any) -> str:
    if record.state == "needs-action":
        detail = NEEDS_ACTION
    else:
        detail = record.reason or (record.answer or "").split("\n", 1)[0]
    detail = detail if len(detail) <= 120 else detail[:119] + "…"
    task = " ".join(record.task.split())
    task = task if len(task) <= 60 else task[:59] + "…"
    return f"- `{record.name}` **{record.state}** — {task}" + (f" ({detail})" if detail else "")


def list_text(hub: SubagentHub, session_id: str) -> str:
    """The session's children with their state, one line each."""
    children = hub.children(session_id)
    if not children:
        return "No subagents in this session. The agent starts them from a cell with `agents.spawn(...)`."
    running = hub.running_children(session_id)
    waiting = len(hub.needing_action(session_id))
    asking = f"; {waiting} needs your action" if waiting else ""
    lines = [f"Subagents of this session ({running} still queued or running{asking}):", ""]
    lines += [_line(record) for record in children]
    return "\n".join(lines)


async def cancel_text(hub: SubagentHub, session_id: str, argument: str) -> str:
    """`/agents cancel <name>|--all`: stop children; says which were stopped."""
    try:
        words = shlex.split(argument)
    except ValueError:
        words = argument.split()
    if words == ["--all"]:
        stopped = await hub.cancel_all(session_id, "cancelled by the user (/agents cancel --all)")
        if not stopped:
            return "No subagent is queued or running; nothing to cancel."
        return "Cancelled: " + ", ".join(f"`{r.name}`" for r in stopped) + "."
    if len(words) != 1:
        return USAGE
    name = words[0]
    try:
        record = hub.child(session_id, name)
    except ValueError as exc:
        return f"{exc}. {USAGE}"
    if not record.active:
        return f"Subagent `{name}` is already {record.state}; nothing to cancel."
    await hub.cancel(session_id, name, "cancelled by the user (/agents cancel)")
    return f"Cancelled subagent `{name}` (now {record.state})."


async def agents_command(hub: SubagentHub | None, session_id: str, argument: str) -> str:
    """The whole `/agents [list | cancel <name> | cancel --all]` command."""
    if hub is None:
        return "Subagents are not available in this session."
    words = argument.split(maxsplit=1)
    if not words or words[0] == "list":
        return list_text(hub, session_id)
    if words[0] == "cancel":
        return await cancel_text(hub, session_id, words[1] if len(words) > 1 else "")
    return f"Unknown /agents action {words[0]!r}. {USAGE}"
