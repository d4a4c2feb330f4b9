"""Subagents in the editor: each spawn is a card in the parent's thread that follows the child.

The card opens (`tool_call`) when the child is admitted and is updated (`tool_call_update`) on every
state change, each followed by the quiescence mirror (`session_info_update` with
`_meta["continual-acp"].quiescence`, frames.quiescence_mirror_update) whose `background` lists the
children still queued or running (empty once all settled) -- also after the parent's turn ended, like
background refinement reports. The card ends with the child's final answer (bounded) or the reason
it failed. `_meta["continual-acp"].subagent`
carries `{sessionId, name, state, parentSessionId}`. Installed by the composition root through
`serve_stdio(extensions=[..., install])`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from acp_server import frames

if TYPE_CHECKING:
    from acp_server.methods import AcpServer
    from acp_server.open_session import OpenSession

log = logging.getLogger(__name__)


def hub_of(session: Any) -> Any | None:
    """The subagent hub a session is attached to (None without subagents)."""
    return getattr(session, "subagents", None)


def card_content(record: Any) -> list[frames.Frame]:
    content = [frames.tool_text(record.task)]
    if record.state in ("finished", "idle") and record.answer:
        content.append(frames.tool_text(record.answer))
    if record.reason:
        content.append(frames.tool_text(f"**{record.state}:** {record.reason}"))
    return content


def watch(server: AcpServer, opened: OpenSession) -> None:
    """Follow the children of one bound session with cards in its thread."""
    hub = hub_of(opened.session)
    if hub is None:
        return
    parent_id = opened.session.id
    shown: set[str] = set()

    async def listener(event: Any) -> None:
        record = event.record
        if record.parent_id != parent_id:
            return
        await card(record, event.state)
        await background_work()

    async def background_work() -> None:
        # The mirror every client gets (ACP.md): which background children the user still waits on,
        # in the same quiescence mirror the harness sends (one shape, refinement state included).
        status = opened.harness.status()
        mirror = frames.quiescence_mirror_update(
            status.quiescent, status.pending, status.last_refinement_id, background_entries(opened.session)
        )
        await server.send_update(parent_id, mirror)

    async def card(record: Any, state: str) -> None:
        if record.session_id not in shown:
            shown.add(record.session_id)
            await server.send_update(
                parent_id,
                frames.subagent_card_update(record.session_id, record.name, record.task, state, parent_id),
            )
            if state in ("queued", "running"):
                return
        await server.send_update(
            parent_id,
            frames.subagent_progress_update(
                record.session_id, record.name, state, parent_id, card_content(record)
            ),
        )

    hub.add_listener(listener)
    earlier = opened.unsubscribe

    def unsubscribe() -> None:
        hub.remove_listener(listener)
        if earlier is not None:
            earlier()

    opened.unsubscribe = unsubscribe


def list_meta(agent: Any, session_id: str) -> frames.Frame | None:
    """`_meta` for a child session's `session/list` entry (None for a top-level session)."""
    hub = getattr(agent, "subagents", None)
    record = hub.record(session_id) if hub is not None else None
    if record is None:
        return None
    return frames.subagent_link_meta(record.parent_id, record.name, record.state)


def background_entries(session: Any) -> list[frames.Frame]:
    """The quiescence mirror's `background` list: this session's children still queued or running."""
    hub = hub_of(session)
    if hub is None:
        return []
    return [
        frames.background_session(r.session_id, r.name, r.state, session.id)
        for r in hub.children(session.id)
        if r.active
    ]


def running_children(session: Any) -> int:
    """Children of this session still queued or running (for the background-work report)."""
    hub = hub_of(session)
    return int(hub.running_children(session.id)) if hub is not None else 0


def install(server: AcpServer) -> None:
    """Show subagent cards in every session bound to this server."""
    server.bind_hooks.append(lambda opened: watch(server, opened))
