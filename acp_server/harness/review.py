"""Review in the editor: a pending proposal asked with `session/request_permission`.

A proposal that needs a human is shown as its review card and asked (apply / apply and trust this
kind for the session / reject / reject forever). One that arrives after its turn ended waits, shown
as a pending card (events.py), and is asked at the start of the next prompt, by `/review`, or decided
through `_harness/review`. agent_core decides (`HarnessSurface.decide`); this module asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from acp_server.harness.cards import REVIEW_OPTIONS, review_card

if TYPE_CHECKING:
    from acp_server.ports import OpenSession
    from agent_core.refinement.records import PendingReview, RefinementOutcome, ReviewChoice

JsonObject = dict[str, object]

_CHOICES: dict[str, ReviewChoice] = {
    "apply": "apply",
    "apply_always": "apply_always",
    "reject": "reject",
    "reject_forever": "reject_forever",
}


async def card_for(opened: OpenSession, pending: PendingReview) -> JsonObject:
    """The proposal's review card, diffed against its store as it is now (read off the loop)."""
    preview = await anyio.to_thread.run_sync(opened.harness.preview, pending)
    return review_card(pending, preview, path_titles=opened.presenter.path_titles)


async def ask_review(opened: OpenSession, pending: PendingReview) -> RefinementOutcome | None:
    """Ask the user about one pending proposal; the decision's outcome, or None if not decided.

    A client that advertised `elicitation.form` gets the card, then a form tied to it (per edit:
    accept, reject, or accept rewritten; a reason); any other gets the permission card."""
    from agent_core.refinement.surface import HarnessStoreError

    if opened.editor.can_elicit_forms:
        return await _ask_with_form(opened, pending)
    card = await card_for(opened, pending)
    # The permission request carries the card: from here on the client knows this tool call.
    opened.shown_reviews.add(pending.proposal_id)
    choice = _CHOICES.get(await opened.editor.ask(card, REVIEW_OPTIONS) or "")
    if choice is None:
        return None  # cancelled or unanswered: the proposal keeps waiting
    try:
        return await opened.harness.decide(pending.proposal_id, choice)
    except HarnessStoreError:
        return None  # decided meanwhile by another route (a panel's `_harness/review`)


async def _ask_with_form(opened: OpenSession, pending: PendingReview) -> RefinementOutcome | None:
    from acp_server.harness.review_form import read_review_form, review_form
    from acp_server.protocol import frames
    from agent_core.refinement.surface import HarnessStoreError

    preview = await anyio.to_thread.run_sync(opened.harness.preview, pending)
    card = review_card(pending, preview, path_titles=opened.presenter.path_titles)
    if pending.proposal_id not in opened.shown_reviews:
        await opened.presenter.send_update(frames.tool_call_update(card))
        opened.shown_reviews.add(pending.proposal_id)
    message, schema = review_form(pending, preview)
    answer = await opened.editor.elicit_form(message, schema, tool_call_id=str(card["toolCallId"]))
    if answer is None or answer[0] != "accept":
        return None  # declined, dismissed or failed: the proposal keeps waiting
    decision = read_review_form(answer[1], pending, preview)
    if decision is None:
        return None
    try:
        return await opened.harness.decide(
            pending.proposal_id,
            decision.choice,
            edit_ids=decision.edit_ids,
            edited=decision.edited or None,
            reason=decision.reason,
        )
    except HarnessStoreError:
        return None  # decided meanwhile by another route


async def ask_pending_reviews(opened: OpenSession, generation: int | None = None) -> bool:
    """Ask every waiting proposal in order; False when the prompt was cancelled (it should stop).

    `generation` is the session's cancel generation when the prompt started (None: read it now).
    """
    start = opened.cancel_generation if generation is None else generation
    for pending in opened.harness.pending_reviews():
        if opened.cancel_generation != start:
            return False
        outcome = await ask_review(opened, pending)
        if outcome is None:
            return opened.cancel_generation == start
    return True


async def wait_for_settlement(opened: OpenSession, timeout: float) -> None:
    """`wait_for_refinement`: the prompt answers only after refinement settled (and was announced)."""
    await opened.harness.wait_quiescent(timeout)
    await opened.harness.flushed()
