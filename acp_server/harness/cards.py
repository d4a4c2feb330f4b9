"""What the client is shown of the harness: review cards and their options, the quiescence frames.

Pure shapes (no I/O), built with the frame builders (frames.py): the review card is the refinement
tool card of a proposal (kind `edit`, one `diff` per edit); the quiescence state goes out as
`_harness/quiescence` and as the `session_info_update` mirror (`_meta["continual-acp"].quiescence`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from acp_server.protocol import client_quirks, frames
from acp_server.protocol.frames import QUIESCENCE

if TYPE_CHECKING:
    from agent_core.refinement.records import PendingReview

JsonObject = dict[str, object]

REVIEW_OPTIONS: list[JsonObject] = frames.permission_options(frames.REVIEW_OPTIONS)

__all__ = [
    "QUIESCENCE",
    "REVIEW_OPTIONS",
    "replay_blocks",
    "review_card",
    "review_settled",
    "review_waiting_message",
]


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _replay_run_line(label: str, run: Mapping[str, object]) -> str:
    error = run.get("error")
    outcome = "could not run" if error else "gates passed" if run.get("passed") else "gates failed"
    line = (
        f"**Replay {label}:** {outcome} ({run.get('requests', 0)} model requests, "
        f"{run.get('tokens', 0)} tokens, {run.get('seconds', 0)} s)"
    )
    if error:
        line += f": {error}"
    tail = str(run.get("gateTail") or "").strip()
    if tail:
        line += f"\n```\n{tail}\n```"
    return line


def replay_blocks(replay: Mapping[str, object] | None) -> list[JsonObject]:
    """A proposal's replays (`refine_verify = "replay"`; agent_core/refinement/replay.py's
    `ReplayReport.to_json()`) as card text: the verdict and why, each run (gates passed or failed,
    the gates' output tail, its cost), and the total cost. None: no blocks."""
    if not replay:
        return []
    lines = [f"**Replay verdict:** {replay.get('verdict', 'not_run')} — {replay.get('reason', '')}"]
    for key, label in (("withEdit", "with the edit"), ("withoutEdit", "without the edit")):
        run = replay.get(key)
        if isinstance(run, Mapping):
            lines.append(_replay_run_line(label, run))
    cost = replay.get("cost")
    if isinstance(cost, Mapping):
        lines.append(
            f"**Replay cost:** {cost.get('requests', 0)} model requests, {cost.get('tokens', 0)} tokens, "
            f"{cost.get('seconds', 0)} s"
        )
    return [frames.tool_text(line) for line in lines]


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
    replay = getattr(pending, "replay", None)
    content += replay_blocks(replay.to_json() if replay is not None else None)
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
