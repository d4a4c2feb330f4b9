"""Refinement outcomes as `RefinementReported` events (an edit card + a one-line message).

The edits carry the before/after snapshots (and the entry's view file, the path an editor shows
the diff under) so the server can render one `diff` per edit without reading the store again; a
failure carries the reason, so a cut-off planner reply is shown as exactly that rather than as a
silent no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agent_core.events import RefinementReported
from agent_core.refinement.records import PendingReview
from harness_store import Proposal, RefinementResult

ViewPath = Callable[[str, str, str], str | None]  # (scope, kind, id) -> path of the entry's view file


def edit_summary(edit: Any, *, scope: str, view_path: ViewPath | None = None) -> dict[str, Any]:
    before = edit.before.model_dump(mode="json") if edit.before is not None else None
    after = edit.after.model_dump(mode="json") if edit.after is not None else None
    entry_scope = (after or before or {}).get("scope") or scope
    body: dict[str, Any] = {
        "action": edit.action,
        "kind": edit.kind,
        "id": edit.id,
        "scope": entry_scope,
        "applied": edit.applied,
        "before": before,
        "after": after,
    }
    if edit.error:
        body["error"] = edit.error
    if edit.evidence:
        body["evidence"] = list(edit.evidence)
    if view_path is not None and edit.id:
        body["view_path"] = view_path(entry_scope, edit.kind, edit.id)
    return body


def report_result(result: RefinementResult, *, view_path: ViewPath | None = None) -> RefinementReported:
    errors = result.errors
    return RefinementReported(
        refinement_id=result.id,
        summary=result.summary or "Refinement",
        scope=result.scope,
        edits=tuple(edit_summary(e, scope=result.scope, view_path=view_path) for e in result.applied_edits),
        applied=result.applied,
        error="; ".join(errors) if errors else None,
    )


def report_failure(job_id: str, scope: str, message: str) -> RefinementReported:
    return RefinementReported(
        refinement_id=job_id,
        summary="Refinement failed",
        scope="global" if scope == "global" else "local",
        edits=(),
        applied=False,
        error=message,
    )


def report_rejection(
    pending: PendingReview, proposal: Proposal, message: str, tombstone_ids: Sequence[str]
) -> RefinementReported:
    edits = tuple(
        {
            "action": edit.action,
            "kind": edit.kind,
            "id": edit.id,
            "scope": pending.scope,
            "applied": False,
            "error": message,
            "proposed": edit.model_dump(mode="json", exclude_none=True),
        }
        for edit in proposal.edits
    )
    suffix = f" (tombstones {', '.join(tombstone_ids)})" if tombstone_ids else ""
    return RefinementReported(
        refinement_id=pending.proposal_id,
        summary=proposal.summary or "Refinement",
        scope=pending.scope,
        edits=edits,
        applied=False,
        error=message + suffix,
    )
