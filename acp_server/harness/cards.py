"""What the client is shown of the harness: review cards and their options, the quiescence frames.

Pure shapes (no I/O): the review card is the refinement tool card of a proposal (kind `edit`, one
`diff` per edit); the quiescence state goes out as `_harness/quiescence` and as the
`session_info_update` mirror (`_meta["continual-acp"].quiescence`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from acp_server.capabilities import META_KEY

if TYPE_CHECKING:
    from agent_core.refinement.records import PendingReview, QuiescenceChanged

JsonObject = dict[str, object]

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


def review_card_id(proposal_id: str) -> str:
    return f"review-{proposal_id}"


def review_card(
    pending: PendingReview, preview: Sequence[Mapping[str, object]], *, status: str = "pending"
) -> JsonObject:
    """The proposal's tool card: one `diff` per edit with a view file, a text line otherwise."""
    content: list[JsonObject] = []
    for edit in preview:
        if edit.get("path"):
            content.append(
                {"type": "diff", "path": edit["path"], "oldText": edit["before"], "newText": edit["after"]}
            )
        else:
            text = " ".join(str(edit.get(k)) for k in ("action", "kind", "id") if edit.get(k))
            content.append({"type": "content", "content": {"type": "text", "text": text}})
    return {
        "toolCallId": review_card_id(pending.proposal_id),
        "title": f"Refine harness: {pending.proposal.summary or 'proposed edits'}",
        "kind": "edit",
        "status": status,
        "content": content,
        "rawInput": pending.to_json(),
    }


def review_waiting_message(proposal_id: str) -> JsonObject:
    """The line under a review card shown after its turn ended."""
    return {
        "sessionUpdate": "agent_message_chunk",
        "content": {
            "type": "text",
            "text": (
                f"\n\nHarness refinement proposal `{proposal_id}` is waiting for your "
                "review: run `/review`, or it is asked at the start of your next prompt.\n"
            ),
        },
    }


def review_settled(proposal_id: str, applied: bool) -> JsonObject:
    """Closes a review card once its proposal is decided."""
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": review_card_id(proposal_id),
        "status": "completed" if applied else "failed",
    }


def quiescence_state(event: QuiescenceChanged) -> JsonObject:
    """`{quiescent, pending, lastRefinementId?}`: the notification's body and the mirror's."""
    state: JsonObject = {"quiescent": event.quiescent, "pending": event.pending}
    if event.last_refinement_id:
        state["lastRefinementId"] = event.last_refinement_id
    return state


def quiescence_mirror(state: JsonObject) -> JsonObject:
    """The `session_info_update` that mirrors a `_harness/quiescence` notification."""
    return {"sessionUpdate": "session_info_update", "_meta": {META_KEY: {"quiescence": state}}}
