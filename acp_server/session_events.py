"""A session's events outside a turn (`Session.notify_user`, `/compact`) -> its presenter.

Inside a turn those events travel with the turn's own stream; outside one, the session hands them to
its `event_listeners`, and this module is the listener that shows them in the editor (as `notice` /
compaction updates where the client advertised them, see presenter.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_server.open_session import OpenSession


def subscribe(opened: OpenSession) -> None:
    """Present the session's outside-turn events through its presenter (sessions without the seam: no-op)."""
    listeners = getattr(opened.session, "event_listeners", None)
    if listeners is None:
        return

    async def listener(event: Any) -> None:
        await opened.presenter.present(event)

    listeners.append(listener)
