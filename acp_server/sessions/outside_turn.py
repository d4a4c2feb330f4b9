"""A session's events outside a turn (`Session.notify_user`, `/compact`) -> its presenter.

Inside a turn those events travel with the turn's own stream; outside one, the session publishes them
on its bus as `OutsideTurn`, and this module is the subscriber that shows them in the editor (as
`notice` / compaction updates where the client advertised them, see presenter.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_core.bus import OutsideTurn

if TYPE_CHECKING:
    from acp_server.ports import OpenSession


def subscribe(opened: OpenSession) -> None:
    """Present the session's outside-turn events through its presenter."""

    async def present(outside: OutsideTurn) -> None:
        await opened.presenter.present(outside.event)

    opened.session.bus.subscribe(OutsideTurn, present)
