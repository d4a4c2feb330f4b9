"""Refinement outcomes as `RefinementReported` events (an edit card + a one-line message).

Each edit carries what the server needs for one `diff` per edit without reading the store again:
`path` (the entry's view file under the data dir), `before`/`after` (the view text, the same
markdown the view file holds) and the structured snapshots (`before_entry`/`after_entry`). A failure
carries the reason, so a cut-off planner reply is shown as exactly that rather than as a no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from agent_core.events import RefinementReported
from agent_core.refinement.records import PendingReview
from agent_core.refinement.replay import ReplayReport
from harness_store import Edit, HarnessEntry, HarnessState, Proposal, RefinementResult, render_view

ViewPath = Callable[[str, str, str], str | None]  # (scope, kind, id) -> path of the entry's view file


def _view(entry: HarnessEntry | None) -> str | None:
    return render_view(entry) if entry is not None else None


def edit_summary(edit: Any, *, scope: str, view_path: ViewPath | None = None) -> dict[str, Any]:
    before: HarnessEntry | None = edit.before
    after: HarnessEntry | None = edit.after
    entry_scope = (after or before).scope if (after or before) is not None else scope  # type: ignore[union-attr]
    body: dict[str, Any] = {
        "action": edit.action,
        "kind": edit.kind,
        "id": edit.id,
        "scope": entry_scope,
        "applied": edit.applied,
        "before_entry": before.model_dump(mode="json") if before is not None else None,
        "after_entry": after.model_dump(mode="json") if after is not None else None,
    }
    if edit.applied or before is not None:
        body["before"] = _view(before)
        body["after"] = _view(after) or ""
    if edit.error:
        body["error"] = edit.error
    if getattr(edit, "check", None):  # the skill check's note on an applied skill
        body["check"] = edit.check
    if edit.evidence:
        body["evidence"] = list(edit.evidence)
    if view_path is not None and edit.id:
        path = view_path(entry_scope, edit.kind, edit.id)
        if path:
            body["path"] = path
    return body


def report_result(
    result: RefinementResult, *, view_path: ViewPath | None = None, replay: ReplayReport | None = None
) -> RefinementReported:
    errors = result.errors
    return RefinementReported(
        refinement_id=result.id,
        summary=result.summary or "Refinement",
        scope=result.scope,
        edits=tuple(edit_summary(e, scope=result.scope, view_path=view_path) for e in result.applied_edits),
        applied=result.applied,
        error="; ".join(errors) if errors else None,
        replay=replay.to_json() if replay is not None else None,
    )


def report_unproven(
    proposal_id: str, proposal: Proposal, scope: str, replay: ReplayReport
) -> RefinementReported:
    """A proposal refused because its replay did not show it helps (nothing was written)."""
    message = f"not applied: the replay did not show the edit helps ({replay.reason})"
    return RefinementReported(
        refinement_id=proposal_id,
        summary=proposal.summary or "Refinement",
        scope="global" if scope == "global" else "project" if scope == "project" else "local",
        edits=tuple(
            {
                "action": e.action,
                "kind": e.kind,
                "id": e.id,
                "scope": scope,
                "applied": False,
                "error": message,
            }
            for e in proposal.edits
        ),
        applied=False,
        error=message,
        replay=replay.to_json(),
    )


def report_failure(job_id: str, scope: str, message: str) -> RefinementReported:
    return RefinementReported(
        refinement_id=job_id,
        summary="Refinement failed",
        scope="global" if scope == "global" else "local",
        edits=(),
        applied=False,
        error=message,
        failed=True,
    )


def _proposed_entry(
    edit: Edit, entry_id: str, current: HarnessEntry | None, scope: str
) -> HarnessEntry | None:
    """What the entry would look like if the edit applied (for a review diff); None for a delete.
    `entry_id` is the id it will get (`resolve_id`: a create without one gets its title's slug)."""
    if edit.action == "delete":
        return None
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    base: dict[str, Any] = (
        current.model_dump()
        if current is not None
        else {"id": entry_id, "kind": edit.kind, "scope": scope, "created_at": now, "version": 0}
    )
    for name in ("title", "content", "path", "reference", "arguments", "metadata", "evidence"):
        value = getattr(edit, name)
        if value is not None:
            base[name] = value
    base.update(updated_at=now, version=int(base.get("version", 0)) + 1, trust="candidate")
    try:
        return HarnessEntry.model_validate(base)
    except Exception:  # an invalid edit (unknown kind, no title): the card shows it as text instead
        return None


def preview_edits(
    pending: PendingReview, state: HarnessState, *, view_path: ViewPath | None = None
) -> tuple[dict[str, Any], ...]:
    """The pending proposal's edits as review diffs against the store as it is now."""
    from harness_store.validation import resolve_id

    edits: list[dict[str, Any]] = []
    for edit in pending.proposal.edits:
        entry_id = resolve_id(edit)
        current = state.get(edit.kind, entry_id) if entry_id else None
        proposed = _proposed_entry(edit, entry_id, current, pending.scope) if entry_id else None
        body: dict[str, Any] = {
            "action": edit.action,
            "kind": edit.kind,
            "id": entry_id,
            "scope": pending.scope,
            "applied": False,
            "before": _view(current),
            "after": _view(proposed) or "",
        }
        if edit.reason:
            body["reason"] = edit.reason
        if edit.evidence:
            body["evidence"] = list(edit.evidence)
        if view_path is not None and entry_id:
            path = view_path(pending.scope, edit.kind, entry_id)
            if path:
                body["path"] = path
        edits.append(body)
    return tuple(edits)


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
