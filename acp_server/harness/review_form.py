"""A review as an elicitation form (stable ACP `elicitation/create`, for clients with `elicitation.form`).

One choice per edit (accept or reject), the edit's text to accept as rewritten, a reason, and
whether to remember the answer; a cell's held change to `.continual-acp/` has one choice (its
files, as a whole). The answer is read back into the same decision the permission card, `/review`
and `_harness/review` make (`FormDecision` -> `HarnessSurface.decide`), so every route decides
alike. Declined or dismissed, the proposal keeps waiting, as an unanswered card does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from agent_core.refinement.records import PendingReview

__all__ = ["FormDecision", "read_review_form", "review_form"]

JsonObject = dict[str, object]
Choice = Literal["apply", "apply_always", "reject", "reject_forever"]

_DECISION: JsonObject = {
    "type": "string",
    "oneOf": [{"const": "accept", "title": "Accept"}, {"const": "reject", "title": "Reject"}],
    "default": "accept",
}
_REASON: JsonObject = {"type": "string", "title": "Reason (optional; kept with a rejection)"}
_REMEMBER: JsonObject = {
    "type": "boolean",
    "title": "Remember: accepted, trust this kind of edit for the session; rejected, never propose it again",
    "default": False,
}


@dataclass(frozen=True)
class FormDecision:
    choice: Choice
    edit_ids: tuple[str, ...] | None = None  # None: every edit
    edited: dict[str, str] = field(default_factory=dict)  # entry id -> the reviewer's text
    reason: str | None = None


def _edit_title(preview: Mapping[str, object]) -> str:
    words = " ".join(str(preview[k]) for k in ("action", "kind", "id") if preview.get(k))
    return words or "edit"


def review_form(pending: PendingReview, preview: Sequence[Mapping[str, object]]) -> tuple[str, JsonObject]:
    """The form's message and `requestedSchema` for one pending proposal."""
    properties: dict[str, JsonObject] = {}
    required: list[str] = []
    if pending.held is not None:
        message = f"A cell changed .continual-acp/ and the change was held: {pending.proposal.summary}"
        properties["decision"] = {**_DECISION, "title": "Write the held files back?"}
        required.append("decision")
    else:
        message = f"Review the harness edits: {pending.proposal.summary or 'proposed edits'}"
        for index, (shown, edit) in enumerate(zip(preview, pending.proposal.edits, strict=False)):
            key = f"edit_{index}"
            properties[key] = {**_DECISION, "title": _edit_title(shown)}
            required.append(key)
            if isinstance(edit.content, str) and shown.get("id"):
                properties[f"{key}_text"] = {
                    "type": "string",
                    "title": f"Text of {_edit_title(shown)} (change it to accept your version)",
                    "default": edit.content,
                }
    properties["reason"] = dict(_REASON)
    properties["remember"] = dict(_REMEMBER)
    return message, {"type": "object", "properties": properties, "required": required}


def read_review_form(
    content: Mapping[str, object], pending: PendingReview, preview: Sequence[Mapping[str, object]]
) -> FormDecision | None:
    """The decision an accepted form makes; None when it does not say (a required choice missing or
    not one of the offered values: the proposal keeps waiting)."""
    reason_raw = content.get("reason")
    reason = reason_raw.strip() or None if isinstance(reason_raw, str) else None
    remember = content.get("remember") is True
    if pending.held is not None:
        decision = content.get("decision")
        if decision not in ("accept", "reject"):
            return None
        accepted_all = decision == "accept"
        return FormDecision(_choice(accepted_all, remember), reason=reason)
    accepted: list[str] = []
    edited: dict[str, str] = {}
    total = 0
    for index, (shown, edit) in enumerate(zip(preview, pending.proposal.edits, strict=False)):
        total += 1
        decision = content.get(f"edit_{index}")
        if decision not in ("accept", "reject"):
            return None
        entry_id = shown.get("id")
        if decision == "reject" or not isinstance(entry_id, str):
            continue
        accepted.append(entry_id)
        text = content.get(f"edit_{index}_text")
        if isinstance(text, str) and isinstance(edit.content, str) and text != edit.content:
            edited[entry_id] = text
    if not accepted:
        return FormDecision(_choice(False, remember), reason=reason)
    chosen = None if len(accepted) == total else tuple(accepted)
    return FormDecision(_choice(True, remember), chosen, edited, reason)


def _choice(accept: bool, remember: bool) -> Choice:
    if accept:
        return "apply_always" if remember else "apply"
    return "reject_forever" if remember else "reject"
