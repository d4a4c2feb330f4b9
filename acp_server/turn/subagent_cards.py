"""Subagents in the editor: each spawn is a card in the parent's thread that follows the child.

The card opens (`tool_call`) when the child is admitted and is updated (`tool_call_update`) on every
state change, each followed by the quiescence mirror (`session_info_update` with
`_meta["continual-acp"].quiescence`, frames.quiescence_mirror_update) whose `background` lists the
children still queued or running (empty once all settled) -- also after the parent's turn ended, like
background refinement reports. The card ends with the child's final answer (bounded) or the reason
it failed. `_meta["continual-acp"].subagent`
carries `{sessionId, name, state, parentSessionId}`. Installed by the composition root through
`serve_stdio(extensions=[..., install])`. Each state change is recorded in the parent's transcript
as a `SubagentChanged` event; the presenter replays it through the same `updates_for`. A client that
advertised `subagents` (unstable) gets `subagent_update` frames instead of the card, live and replayed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from acp_server.ports import SessionBound, SessionReplayed
from acp_server.protocol import frames
from acp_server.protocol.frames import QUIESCENCE
from acp_server.sessions.background import quiescence_params, quiescence_update

if TYPE_CHECKING:
    from acp_server.ports import ExtensionHost, OpenSession
    from agent_core.agent import Agent
    from agent_core.events import SubagentChanged
    from agent_core.session import Session
    from agent_core.subagents.hub import SubagentHub
    from agent_core.subagents.records import ChildChanged, ChildRecord

log = logging.getLogger(__name__)

NEEDS_ACTION_TEXT = "**needs action:** waiting for your answer to its permission request"


def hub_of(session: Session) -> SubagentHub | None:
    """The subagent hub a session is attached to (None without subagents)."""
    return session.subagents


def card_content(change: SubagentChanged) -> list[frames.Frame]:
    content = [frames.tool_text(change.task)]
    if change.state in ("finished", "idle") and change.answer:
        content.append(frames.tool_text(change.answer))
    if change.reason:
        content.append(frames.tool_text(f"**{change.state}:** {change.reason}"))
    if change.state == "needs-action":
        content.append(frames.tool_text(NEEDS_ACTION_TEXT))
    return content


def change_of(record: ChildRecord, state: str) -> SubagentChanged:
    """A hub record's state change as the event the parent's transcript records."""
    from agent_core.events import SubagentChanged

    return SubagentChanged(
        child_session_id=record.session_id,
        name=record.name,
        task=record.task,
        state=state,
        parent_session_id=record.parent_id,
        answer=record.answer or None,
        reason=record.reason or None,
    )


def card_updates(change: SubagentChanged, shown: set[str]) -> list[frames.Frame]:
    """The updates one state change makes to the child's card: it opens (`tool_call`) the first
    time `shown` has not seen the child, and is updated after. Live and replayed alike."""
    updates: list[frames.Frame] = []
    child, parent = change.child_session_id, change.parent_session_id
    if child not in shown:
        shown.add(child)
        updates.append(frames.subagent_card_update(child, change.name, change.task, change.state, parent))
        if change.state in ("queued", "running", "needs-action"):
            return updates
    updates.append(
        frames.subagent_progress_update(child, change.name, change.state, parent, card_content(change))
    )
    return updates


def updates_for(change: SubagentChanged, shown: set[str], *, subagent_update: bool) -> list[frames.Frame]:
    """What one state change sends: to a client that advertised `subagents` (unstable,
    `subagent_update`) one `subagent_update` (the first announces the child); to every other client
    the card's updates. Live, replayed on session/load and after it alike."""
    if subagent_update:
        shown.add(change.child_session_id)
        child, parent = change.child_session_id, change.parent_session_id
        return [frames.subagent_update(child, change.name, change.task, change.state, parent)]
    return card_updates(change, shown)


def live_updates(server: ExtensionHost, change: SubagentChanged, shown: set[str]) -> list[frames.Frame]:
    """A live state change, in the shape this client reads (`updates_for`)."""
    return updates_for(change, shown, subagent_update=server.client.subagents)


def watch(server: ExtensionHost, opened: OpenSession) -> None:
    """Follow the children of one bound session with cards in its thread."""
    hub = hub_of(opened.session)
    if hub is None:
        return
    parent_id = opened.session.id
    shown: set[str] = set()
    active: set[str] = set()  # the children counted in the last quiescence report

    async def listener(event: ChildChanged) -> None:
        record = event.record
        if record.parent_id != parent_id:
            return
        change = change_of(record, event.state)
        opened.session.record_event(change)  # so session/load of the parent replays the card
        for update in live_updates(server, change, shown):
            await server.send_update(parent_id, update)
        await background_work()

    async def background_work() -> None:
        # The mirror every client gets: which background children the user still waits on,
        # in the same quiescence mirror the harness sends (one shape, refinement state included).
        now = opened.harness.quiescence()
        children = background_entries(opened.session)
        await server.send_update(parent_id, quiescence_update(now, children))
        now_active = {str(entry["sessionId"]) for entry in children}
        if now_active != active:
            # A child was admitted or settled: a quiescence transition, so a client that opted in to
            # `_harness/quiescence` hears it too (a needs-action change alone is not one).
            active.clear()
            active.update(now_active)
            if QUIESCENCE in server.extension_notifications and server.client.quiescence:
                await server.notify(QUIESCENCE, quiescence_params(parent_id, now))

    from agent_core.subagents.records import ChildChanged  # after the session/new answer

    subscription = hub.bus.subscribe(ChildChanged, listener)
    earlier = opened.unsubscribe

    def unsubscribe() -> None:
        subscription.cancel()
        if earlier is not None:
            earlier()

    opened.unsubscribe = unsubscribe


def list_meta(agent: Agent, session_id: str) -> frames.Frame | None:
    """`_meta` for a child session's `session/list` entry (None for a top-level session)."""
    hub = agent.subagents
    record = hub.record(session_id) if hub is not None else None
    if record is None:
        return None
    return frames.subagent_link_meta(record.parent_id, record.name, record.state)


def background_entries(session: Session) -> list[frames.Frame]:
    """The quiescence mirror's `background` list: this session's children still queued or running."""
    hub = hub_of(session)
    if hub is None:
        return []
    return [
        frames.background_session(r.session_id, r.name, r.state, session.id)
        for r in hub.children(session.id)
        if r.active
    ]


def needing_action(session: Session) -> list[str]:
    """Names of this session's children waiting for the user's answer to a permission request."""
    hub = hub_of(session)
    return [r.name for r in hub.needing_action(session.id)] if hub is not None else []


def running_children(session: Session) -> int:
    """Children of this session still queued or running (for the background-work report)."""
    hub = hub_of(session)
    return hub.running_children(session.id) if hub is not None else 0


async def after_replay(server: ExtensionHost, opened: OpenSession) -> None:
    """After a parent's session/load replay: a child whose state changed unrecorded (interrupted by
    a restart) gets its card updated to that state, and the change is recorded from now on."""
    hub = hub_of(opened.session)
    if hub is None:
        return
    replayed = opened.presenter.replayed_subagents
    for record in hub.children(opened.session.id):
        last = replayed.get(record.session_id)
        if last is None or last == record.state:
            continue
        change = change_of(record, record.state)
        opened.session.record_event(change)
        for update in updates_for(change, set(replayed), subagent_update=server.client.subagents):
            await server.send_update(opened.session.id, update)


def install(server: ExtensionHost) -> None:
    """Show subagent cards in every session bound to this server."""
    server.bus.subscribe(SessionBound, lambda bound: watch(server, bound.opened))
    server.bus.subscribe(SessionReplayed, lambda replayed: after_replay(server, replayed.opened))
