"""Refinement in the editor: reports and quiescence to the client, review via permission, /refine, /review.

* Every refinement report becomes the refinement tool card (+ a one-line message); every quiescence
  transition becomes `_harness/quiescence {sessionId, quiescent, pending, lastRefinementId?}` plus its
  `session_info_update` mirror (`_meta["continual-acp"].quiescence`), written before anyone waiting for
  that transition is woken.
* A proposal that needs a human is shown as the refinement card (kind `edit`, one `diff` per edit)
  and asked with `session/request_permission` (apply / apply and trust this kind for the session /
  reject / reject forever). One that arrives after its turn ended waits, shown as a pending card,
  and is asked at the start of the next prompt, by `/review`, or decided through `_harness/review`.

agent_core does the work (`session.refinement.coordinator`); this module only maps it onto the wire.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from acp_server.background import quiescence_mirror  # clients: the mirror with its background list

if TYPE_CHECKING:
    from acp_server.methods import AcpServer, OpenSession

log = logging.getLogger(__name__)

QUIESCENCE = "_harness/quiescence"

REVIEW_OPTIONS: list[dict[str, str]] = [
    {"optionId": "apply", "name": "Apply", "kind": "allow_once"},
    {
        "optionId": "apply_always",
        "name": "Apply, and trust this kind of edit for the session",
        "kind": "allow_always",
    },
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_forever", "name": "Reject, and never propose this again", "kind": "reject_always"},
]
_CHOICES = {o["optionId"] for o in REVIEW_OPTIONS}

Reply = Callable[[str], Awaitable[None]]


def coordinator_of(opened: OpenSession) -> Any | None:
    """The session's refinement coordinator (None when refinement is not attached)."""
    refinement = getattr(opened.session, "refinement", None)
    return getattr(refinement, "coordinator", None)


async def send_quiescence(server: AcpServer, session_id: str, event: Any) -> None:
    """The `_harness/quiescence` notification, then its `session_info_update` mirror."""
    state: dict[str, Any] = {"quiescent": event.quiescent, "pending": event.pending}
    if event.last_refinement_id:
        state["lastRefinementId"] = event.last_refinement_id
    conn = server.connection
    if conn is None:
        return
    if server.client.quiescence:  # only to a client that opted in (capabilities.py) - clients
        await conn.notify(QUIESCENCE, {"sessionId": session_id, **state})
    await server.send_update(session_id, quiescence_mirror(event))


def review_card(opened: OpenSession, pending: Any, *, status: str = "pending") -> dict[str, Any]:
    from agent_core.refinement.reporting import preview_edits

    coordinator = coordinator_of(opened)
    store = opened.session.global_store if pending.scope == "global" else opened.session.local_store
    view = coordinator.view_path if coordinator is not None else None
    content: list[dict[str, Any]] = []
    for edit in preview_edits(pending, store.load(), view_path=view):
        if edit.get("path"):
            content.append(
                {"type": "diff", "path": edit["path"], "oldText": edit["before"], "newText": edit["after"]}
            )
        else:
            text = " ".join(str(edit.get(k)) for k in ("action", "kind", "id") if edit.get(k))
            content.append({"type": "content", "content": {"type": "text", "text": text}})
    return {
        "toolCallId": f"review-{pending.proposal_id}",
        "title": f"Refine harness: {pending.proposal.summary or 'proposed edits'}",
        "kind": "edit",
        "status": status,
        "content": content,
        "rawInput": pending.to_json(),
    }


def watch(server: AcpServer, opened: OpenSession) -> None:
    """Forward a session's quiescence and review requests to the client.

    Refinement results themselves are presented by the server's own subscription (methods.py);
    both listen to the same ordered outbox, so a result's card precedes the settling notification.
    """
    coordinator = coordinator_of(opened)
    if coordinator is None:
        return
    from agent_core.refinement import QuiescenceChanged, ReviewRequested

    session_id = opened.session.id

    async def listener(event: Any) -> None:
        if isinstance(event, QuiescenceChanged):
            await send_quiescence(server, session_id, event)
        elif isinstance(event, ReviewRequested) and not event.pending.interactive:
            card = await anyio.to_thread.run_sync(review_card, opened, event.pending)
            await server.send_update(session_id, {"sessionUpdate": "tool_call", **card})
            _shown_reviews(opened).add(event.pending.proposal_id)
            await server.send_update(
                session_id,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {
                        "type": "text",
                        "text": (
                            f"\n\nHarness refinement proposal `{event.pending.proposal_id}` is waiting for your "
                            "review: run `/review`, or it is asked at the start of your next prompt.\n"
                        ),
                    },
                },
            )

    coordinator.add_listener(listener)
    earlier = opened.unsubscribe

    def unsubscribe() -> None:
        coordinator.remove_listener(listener)
        if earlier is not None:
            earlier()

    opened.unsubscribe = unsubscribe


def _shown_reviews(opened: OpenSession) -> set[str]:
    """Proposal ids whose review card the client has seen (so a later decision can settle it)."""
    return opened.shown_reviews


async def settle_review_card(server: AcpServer, opened: OpenSession, proposal_id: str, outcome: Any) -> None:
    """Close a pending review card once its proposal is decided (by any route)."""
    shown = _shown_reviews(opened)
    if proposal_id not in shown:
        return
    shown.discard(proposal_id)
    status = "completed" if outcome.status == "applied" else "failed"
    await server.send_update(
        opened.session.id,
        {"sessionUpdate": "tool_call_update", "toolCallId": f"review-{proposal_id}", "status": status},
    )


async def ask_review(server: AcpServer, opened: OpenSession, pending: Any) -> Any | None:
    """Ask the user about one pending proposal; the decision's outcome, or None if not decided."""
    coordinator = coordinator_of(opened)
    if coordinator is None:
        return None
    card = await anyio.to_thread.run_sync(review_card, opened, pending)
    # The permission request carries the card: from here on the client knows this tool call.
    _shown_reviews(opened).add(pending.proposal_id)
    choice = await opened.editor.ask(card, REVIEW_OPTIONS)
    if choice not in _CHOICES:
        return None  # cancelled or unanswered: the proposal keeps waiting
    try:
        outcome = await coordinator.decide(pending.proposal_id, choice)
    except KeyError:
        return None  # decided meanwhile by another route (a panel's `_harness/review`)
    await coordinator.flushed()
    await settle_review_card(server, opened, pending.proposal_id, outcome)
    return outcome


async def ask_pending_reviews(server: AcpServer, opened: OpenSession, generation: int | None = None) -> bool:
    """Ask every waiting proposal in order; False when the prompt was cancelled (it should stop).

    `generation` is the session's cancel generation when the prompt started (None: read it now).
    """
    coordinator = coordinator_of(opened)
    if coordinator is None:
        return True
    start = opened.cancel_generation if generation is None else generation
    for pending in list(coordinator.pending_reviews.values()):
        if opened.cancel_generation != start:
            return False
        outcome = await ask_review(server, opened, pending)
        if outcome is None:
            return opened.cancel_generation == start
    return True


async def wait_for_settlement(opened: OpenSession, timeout: float) -> None:
    """`wait_for_refinement`: the prompt answers only after refinement settled (and was announced)."""
    coordinator = coordinator_of(opened)
    if coordinator is not None:
        await coordinator.wait_quiescent(timeout)
        await coordinator.flushed()


# ---------------------------------------------------------------- slash commands


async def refine_command(server: AcpServer, opened: OpenSession, argument: str, reply: Reply) -> None:
    coordinator = coordinator_of(opened)
    if coordinator is None:
        await reply("Refinement is not available in this session (no model is configured).")
        return
    try:
        words = shlex.split(argument)
    except ValueError:
        words = argument.split()
    scope = "global" if "--global" in words else "local"
    instructions = " ".join(w for w in words if w != "--global") or None
    outcome = await coordinator.refine_now(instructions=instructions, scope=scope)
    await coordinator.flushed()
    if outcome.status == "pending_review":
        pending = coordinator.pending_reviews.get(outcome.proposal_id)
        if pending is not None:
            decided = await ask_review(server, opened, pending)
            if decided is None:
                await reply(f"The proposal `{outcome.proposal_id}` waits for your review (`/review`).")
        return
    if outcome.status == "empty":
        await reply(f"Nothing to refine: {outcome.summary}.")
    elif outcome.status == "failed":
        await reply(f"Refinement failed: {outcome.error}")


async def review_command(server: AcpServer, opened: OpenSession, argument: str, reply: Reply) -> None:
    coordinator = coordinator_of(opened)
    if coordinator is None or not coordinator.pending_reviews:
        await reply("Nothing is waiting for review.")
        return
    waiting = list(coordinator.pending_reviews.values())
    count = len(waiting)
    listed = "\n".join(
        f"- `{p.proposal_id}` ({p.scope}): {p.proposal.summary or 'proposed edits'}" for p in waiting
    )
    await reply(f"Waiting for review:\n{listed}\n")
    await ask_pending_reviews(server, opened)
    left = len(coordinator.pending_reviews)
    await reply(
        f"Reviewed {count - left} of {count} waiting proposals." + (" The rest still wait." if left else "")
    )
