"""Keeps `sessions/<id>/quiescence.json` current for every session bound to this server.

The file's format, writer and reader are `quiescence_file.py`; this is when it is written: at bind,
after every harness event and child state change that alters the snapshot (the events the
quiescence notification and its mirror are sent from: harness/events.py, subagent_cards.py), while
busy every `REFRESH_SECONDS` if the counters moved, and `ended` when the session is unbound
(session/close, session/delete, the server's shutdown).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server.ports import SessionBound
from acp_server.sessions.quiescence_file import write_ended, write_quiescence

if TYPE_CHECKING:
    from acp_server.ports import ExtensionHost, OpenSession
    from agent_core.refinement.surface import HarnessEvent
    from agent_core.subagents.records import ChildChanged

log = logging.getLogger(__name__)

__all__ = ["REFRESH_SECONDS", "QuiescencePublisher", "install", "snapshot", "watch"]

REFRESH_SECONDS = 0.25  # while busy: how often the counters are re-read (they move between events)


def snapshot(opened: OpenSession) -> dict[str, Any]:
    """`{quiescent, pending, in_flight, background}` of one open session, now (on its server loop).

    The harness service's `quiescence()` (settled: no refinement work and no child the user still
    waits on), not `status()`: that also counts reviews on disk, and the panel reads this several
    times a second (it counts reviews itself)."""
    from acp_server.sessions.background import snapshot_state
    from acp_server.turn.subagent_cards import background_entries

    return snapshot_state(opened.harness.quiescence(), background_entries(opened.session))


class QuiescencePublisher:
    """Keeps one open session's quiescence file current (rewritten only when the snapshot changes).

    The events say when the session turns busy or settled and when a child changes state; while
    it is busy the counters also move without an event (a queued job starts running), so the
    snapshot is re-read every `REFRESH_SECONDS` until it settles (the in-server panel's pace)."""

    def __init__(self, opened: OpenSession) -> None:
        self.opened = opened
        self.session_id = opened.session.id
        self.directory = Path(opened.session.session_dir)
        self._last: dict[str, Any] | None = None
        self._ended = False
        self._refresher: asyncio.Task[None] | None = None

    def _write(self, state: Mapping[str, Any] | None, *, ended: bool) -> None:
        try:
            if state is None:
                write_ended(self.directory, self.session_id)
            else:
                write_quiescence(self.directory, self.session_id, state, ended=ended)
        except OSError as exc:  # a deleted session directory, a full disk: readers say unknown
            log.warning("cannot write the quiescence file of %s: %s", self.session_id, exc)

    def update(self) -> None:
        """Write the session's snapshot if it differs from the last one written."""
        if self._ended:
            return
        try:
            state = snapshot(self.opened)
        except Exception:
            log.exception("cannot read the quiescence of %s", self.session_id)
            return
        if state != self._last:
            self._last = state
            self._write(state, ended=False)
        if not state["quiescent"]:
            self._keep_fresh()

    def _keep_fresh(self) -> None:
        if self._refresher is not None and not self._refresher.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the server loop (a test calling update directly)
            return
        self._refresher = loop.create_task(self._refresh(), name=f"quiescence-file-{self.session_id}")

    async def _refresh(self) -> None:
        while not self._ended:
            await asyncio.sleep(REFRESH_SECONDS)
            self.update()
            if self._last is None or self._last["quiescent"]:
                return

    def end(self) -> None:
        """The session closed: the file says so (idempotent; nothing when its directory is gone)."""
        if self._ended:
            return
        self._ended = True
        if self._refresher is not None:
            self._refresher.cancel()
        if self.directory.is_dir():
            self._write(None, ended=True)


def watch(opened: OpenSession) -> QuiescencePublisher:
    """Publish `opened`'s quiescence until the session is unbound (then mark the file ended)."""
    publisher = QuiescencePublisher(opened)
    publisher.update()

    async def on_harness_event(_event: HarnessEvent) -> None:
        publisher.update()

    unsubscribe = opened.harness.subscribe(on_harness_event)
    hub = opened.session.subagents

    async def on_child(event: ChildChanged) -> None:
        if event.record.parent_id == publisher.session_id:
            publisher.update()

    from agent_core.subagents.records import ChildChanged  # after the session/new answer

    subscription = hub.bus.subscribe(ChildChanged, on_child) if hub is not None else None
    earlier = opened.unsubscribe

    def unbind() -> None:
        unsubscribe()
        if subscription is not None:
            subscription.cancel()
        publisher.end()
        if earlier is not None:
            earlier()

    opened.unsubscribe = unbind
    return publisher


def install(server: ExtensionHost) -> None:
    """Keep a quiescence file for every session bound to this server."""

    def bind(opened: OpenSession) -> None:
        watch(opened)

    server.bus.subscribe(SessionBound, lambda bound: bind(bound.opened))
