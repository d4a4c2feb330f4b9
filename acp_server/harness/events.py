"""The server's one subscription to a session's harness events, dispatched by type.

* `RefinementReported` -> the refinement tool card + its one-line message (the presenter);
* `ReviewRequested` (not asked at once by whoever requested it) -> the pending review card and a
  line saying how to review it;
* `ReviewDecided` -> the review card the client was shown is settled (completed / failed);
* `QuiescenceChanged` -> `_harness/quiescence {sessionId, quiescent, pending, lastRefinementId?}`
  (when the server advertises it) and its `session_info_update` mirror.

The transcript record of each card is agent_core's (`HarnessSurface` writes it before any
subscriber runs), so a card reaches the transcript even when no client is attached. Events arrive
in the order they happened and each is delivered before anyone waiting for quiescence wakes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from acp_server.harness.cards import QUIESCENCE, review_settled, review_waiting_message
from acp_server.harness.review import card_for
from acp_server.protocol import frames
from acp_server.turn.subagent_cards import background_entries

if TYPE_CHECKING:
    from acp_server.ports import OpenSession, ServerPort
    from agent_core.refinement.surface import HarnessEvent

# The notification and its mirror, with the background work (children) still going on.
from acp_server.sessions.background import quiescence_params, quiescence_update

log = logging.getLogger(__name__)


def subscribe(server: ServerPort, opened: OpenSession) -> None:
    """Forward `opened`'s harness events to the client until the session is unbound."""
    from agent_core.events import RefinementReported
    from agent_core.refinement.records import QuiescenceChanged, ReviewDecided, ReviewRequested

    session_id = opened.session.id

    async def on_event(event: HarnessEvent) -> None:
        if isinstance(event, RefinementReported):
            await opened.presenter.present(event)
        elif isinstance(event, QuiescenceChanged):
            if QUIESCENCE in server.extension_notifications:
                # The notification only to a client that opted in (`clientCapabilities._meta
                # ["continual-acp"].quiescence`); every client gets the session_info_update mirror,
                # which also lists the background work still running (children, refinement jobs).
                from agent_core.refinement.quiescence import Quiescence

                children = background_entries(opened.session)
                now = Quiescence.at(event, children=len(children))
                if server.client.quiescence:
                    await server.notify(QUIESCENCE, quiescence_params(session_id, now))
                await server.send_update(session_id, quiescence_update(now, children))
        elif isinstance(event, ReviewRequested):
            if event.pending.interactive:
                return  # asked at once by whoever requested it (`/refine` in a live prompt)
            card = await card_for(opened, event.pending)
            await server.send_update(session_id, frames.tool_call_update(card))
            opened.shown_reviews.add(event.pending.proposal_id)
            await server.send_update(session_id, review_waiting_message(event.pending.proposal_id))
        elif isinstance(event, ReviewDecided):
            if event.proposal_id in opened.shown_reviews:
                opened.shown_reviews.discard(event.proposal_id)
                await server.send_update(
                    session_id, review_settled(event.proposal_id, event.outcome.status == "applied")
                )

    unsubscribe = opened.harness.subscribe(on_event)
    earlier = opened.unsubscribe

    def unsubscribe_all() -> None:
        unsubscribe()
        if earlier is not None:
            earlier()

    opened.unsubscribe = unsubscribe_all
