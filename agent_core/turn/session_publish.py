"""Showing an event: into the running turn when there is one, else recorded in the transcript and
published as `OutsideTurn` on the session's bus (the editor connection shows it); `notify_user`,
the notice for what the user should know but the model need not.

`SessionPublishing` is a part of `Session` (session.py): it names what it uses of the session
below, and the session supplies it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent_core import events as ev
from agent_core.bus import EventBus, OutsideTurn
from agent_core.history.transcript import TranscriptWriter

log = logging.getLogger(__name__)


class SessionPublishing:
    # What this part uses of the session (set by `Session.__init__`).
    id: str
    bus: EventBus
    _writer: TranscriptWriter
    _emit: Callable[[ev.TurnEvent], None] | None  # the running turn's, None between turns

    def record_event(self, event: ev.TurnEvent) -> None:
        """Append an event that happened outside a turn (a background refinement) to the transcript,
        so a later `session/load` replays it."""
        try:
            self._writer.event(event)
        except ValueError:
            log.warning("session %s is closed; event %s not recorded", self.id, type(event).__name__)

    async def publish(self, event: ev.TurnEvent) -> None:
        """Show an event now: into the running turn when there is one, else recorded (a notice is
        live information and is not) and published as `OutsideTurn` (the editor connection shows it)."""
        if self.emit_into_turn(event):
            return
        if not isinstance(event, ev.Notice):
            self.record_event(event)
        await self.bus.publish(OutsideTurn(event))

    async def notify_user(
        self,
        severity: ev.NoticeSeverity,
        title: str,
        description: str | None = None,
        *,
        fallback: bool = True,
    ) -> None:
        """Tell the user something that is not part of the answer: an ACP `notice` in clients that
        advertise `session.notices`, else (when `fallback`) an agent message. Use it for what the user
        should know but the model need not: a failed MCP server, a sandbox not in force, a gate not
        rerun. Inside a turn, turn.py emits `ev.Notice` itself (it has no session, only TurnContext)."""
        await self.publish(ev.Notice(severity, title, description, fallback))

    def emit_into_turn(self, event: ev.TurnEvent) -> bool:
        """Add an event to the running turn's stream (host-bridge handlers); False when no turn runs."""
        if self._emit is None:
            return False
        self._emit(event)
        return True
