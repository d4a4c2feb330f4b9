"""What the client is shown of the harness: review cards and their options, the quiescence frames.

Pure shapes (no I/O), built with the frame builders (frames.py): the review card is the refinement
tool card of a proposal (kind `edit`, one `diff` per edit); the quiescence state goes out as
`_harness/quiescence` and as the `session_info_update` mirror (`_meta["continual-acp"].quiescence`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from acp_server import client_quirks, frames
from acp_server.frames import QUIESCENCE

if TYPE_CHECKING:
    from agent_core.refinement.records import PendingReview

JsonObject = dict[str, object]

REVIEW_OPTIONS: list[JsonObject] = frames.permission_options(frames.REVIEW_OPTIONS)

__all__ = [
    "QUIESCENCE",
    "REVIEW_OPTIONS",
    "review_card",
    "review_settled",
    "review_waiting_message",
]


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def review_card(
    pending: PendingReview, preview: Sequence[Mapping[str, object]], *, path_titles: bool = False
) -> JsonObject:
    """The proposal's tool card: one `diff` per edit with a view file, a text line otherwise.

    `path_titles`: the client titles edit cards by diff path (client_quirks.py): the card keeps its
    words (colon-free title repeated as the first block, diffs as text)."""
    content: list[JsonObject] = []
    for edit in preview:
        path = edit.get("path")
        if path:
            content.append(
                frames.tool_diff(str(path), _text(edit.get("before")), str(edit.get("after") or ""))
            )
        else:
            content.append(
                frames.tool_text(" ".join(str(edit.get(k)) for k in ("action", "kind", "id") if edit.get(k)))
            )
    # A cell's change to .continual-acp/ is not a refinement: its card says what it is.
    held_title = pending.proposal.summary if getattr(pending, "held", None) is not None else None
    card = frames.review_card(
        pending.proposal_id, pending.proposal.summary, content, pending.to_json(), title=held_title
    )
    if path_titles:
        title, shown = client_quirks.path_free_card(str(card["title"]), content)
        card = frames.review_card(
            pending.proposal_id, pending.proposal.summary, shown, pending.to_json(), title=title
        )
    return card


def review_waiting_message(proposal_id: str) -> JsonObject:
    """The line under a review card shown after its turn ended."""
    return frames.review_waiting_update(proposal_id)


def review_settled(proposal_id: str, applied: bool) -> JsonObject:
    """Closes a review card once its proposal is decided."""
    return frames.review_settled_update(proposal_id, applied=applied)
