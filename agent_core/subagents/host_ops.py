"""Host handlers for the kernel's `agents.*` calls, bound to one session on its host bridge.

`agents.spawn` returns at admission; `agents.wait` (waits for a message without taking it, at most
`WAIT_SLICE` s) is the only call that blocks; the others answer at once. Errors the model can act on are `SubagentError`s, which the
bridge turns into the kernel-side `HostError` with the message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agent_core.subagents.records import SubagentError

if TYPE_CHECKING:
    from agent_core.subagents.session_port import SubagentSession

# The longest single wait the kernel asks for; `agents.inbox(wait=True)` waits in slices of it, so a
# wait abandoned by an interrupted cell holds its bridge connection for at most this long.
WAIT_SLICE = 5.0

# The hub is named `Any` here: it imports this module to register the ops, and even a typing-only
# import back would make a cycle (tests/agent_core/test_agent_import_graph.py counts those too).
SubagentHub = Any


def _optional_str(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is not None and not isinstance(value, str):
        raise SubagentError(f"{key} must be a string or None, not {type(value).__name__}")
    return value


def _handle(record: Any) -> dict[str, Any]:
    return {
        "name": record.name,
        "session_id": record.session_id,
        "state": record.state,
        "depth": record.depth,
        "parent_session_id": record.parent_id,
        **({"model": record.model} if record.model else {}),
        **({"spec": record.spec} if record.spec else {}),
    }


def handlers(
    hub: SubagentHub, session: SubagentSession
) -> dict[str, Callable[[dict[str, Any]], Awaitable[Any]]]:
    """Each `agents.*` op bound to `session`, ready for `host_bridge.register(op, handler)`."""

    async def spawn(args: dict[str, Any]) -> dict[str, Any]:
        task = args.get("task")
        if not isinstance(task, str):
            raise SubagentError("spawn needs a task string")
        cwd = _optional_str(args, "cwd")
        if cwd is not None:
            # The child's cwd becomes a workspace its own kernel may write: judged as a write of
            # this session's (never `.continual-acp/`, `.git`, the data dir, ...).
            cwd = await session.judge_host_call("agents.spawn", "write", cwd)
        record = await hub.spawn(
            session,
            task,
            name=_optional_str(args, "name"),
            spec=_optional_str(args, "spec"),
            model=_optional_str(args, "model"),
            cwd=cwd,
        )
        return _handle(record)

    async def send(args: dict[str, Any]) -> dict[str, Any]:
        sent: dict[str, Any] = hub.send(session, args.get("message"), args.get("to", "parent"))
        return sent

    async def inbox(args: dict[str, Any]) -> list[dict[str, Any]]:
        return [m.to_json() for m in hub.take(session.id)]

    async def wait(args: dict[str, Any]) -> int:
        timeout = args.get("timeout")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise SubagentError("timeout must be a non-negative number of seconds")
        arrived: int = await hub.inbox(session.id).arrival(min(float(timeout), WAIT_SLICE))
        return arrived

    async def list_children(args: dict[str, Any]) -> list[dict[str, Any]]:
        return [r.summary() for r in hub.children(session.id)]

    async def observe(args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if not isinstance(name, str):
            raise SubagentError("observe needs a child name")
        observed: dict[str, Any] = hub.observe(session, name)
        return observed

    async def cancel(args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if not isinstance(name, str):
            raise SubagentError("cancel needs a child name")
        return _handle(await hub.cancel(session.id, name))

    return {
        "agents.spawn": spawn,
        "agents.send": send,
        "agents.inbox": inbox,
        "agents.wait": wait,
        "agents.list": list_children,
        "agents.observe": observe,
        "agents.cancel": cancel,
    }


def register_host_ops(bridge: Any, hub: SubagentHub, session: SubagentSession) -> None:
    """Register `agents.*` on a session's host bridge."""
    for name, handler in handlers(hub, session).items():
        bridge.register(name, handler)
