"""What the page shows for an action: `ActionResult` and the message for each service answer.

`actions.py` routes an action to a session's surface or a harness service; this module turns the
answer into the page's `{ok, message, refinement_id, errors, ...}` and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_core.refinement.records import RefinementOutcome, RollbackOutcome
    from agent_core.refinement.surface import Promotion, RefinementResult


@dataclass
class ActionResult:
    """The outcome the page shows: ok, the new refinement id (if any), and what was refused."""

    ok: bool
    message: str
    refinement_id: str | None = None
    errors: list[str] = field(default_factory=list)
    conflict: bool = False  # a rollback refused because entries changed since (force may override)
    tombstones: list[str] = field(default_factory=list)
    refinement_ids: list[str] = field(default_factory=list)  # every record the action wrote
    via_session: str | None = None  # the open session whose harness made the change (its card)
    open_elsewhere: list[str] = field(default_factory=list)  # open in another server: no card there

    def to_json(self) -> dict[str, Any]:
        ids = self.refinement_ids or ([self.refinement_id] if self.refinement_id else [])
        return {
            "ok": self.ok,
            "message": self.message,
            "refinement_id": self.refinement_id,
            "refinement_ids": ids,
            "errors": self.errors,
            "conflict": self.conflict,
            "tombstones": self.tombstones,
            "via_session": self.via_session,
            "open_elsewhere": self.open_elsewhere,
        }


def with_open_elsewhere(result: ActionResult, sessions: list[str]) -> ActionResult:
    """A direct store write's result naming the sessions that see it only at their next read."""
    if not result.ok:
        return result
    result.open_elsewhere = sessions
    if sessions:
        result.message += (
            f" Made by the review panel: open session(s) {', '.join(sessions)} in "
            "another server read the change at their next step (no card is shown there)."
        )
    return result


def decided_via_session(outcome: RefinementOutcome, done: str, session_id: str) -> ActionResult:
    """A `RefinementOutcome` of a decision made through a session's surface, as the page shows it."""
    rid = outcome.refinement_id
    if outcome.status == "applied":
        ids = list(outcome.refinement_ids)
        return ActionResult(
            True, f"{done}: refinement {rid}.", rid, refinement_ids=ids, via_session=session_id
        )
    if outcome.status == "rejected":
        return ActionResult(True, f"{done} ({outcome.error}).", via_session=session_id)
    errors = [outcome.error] if outcome.error else []
    recorded = f" (recorded as {rid})" if rid else ""
    return ActionResult(False, f"Not done{recorded}.", rid, errors, via_session=session_id)


def rolled_back(
    refinement_id: str, outcome: RollbackOutcome, force: bool, *, via: str | None = None
) -> ActionResult:
    if outcome.rolled_back_by is not None:  # answered before any write: no record for a no-op
        return ActionResult(
            False, f"Refinement {refinement_id} was already rolled back by {outcome.rolled_back_by}."
        )
    result = outcome.result
    assert result is not None
    if outcome.refused:
        return refused_rollback(refinement_id, result, force)
    ids = [result.id, *([outcome.partner_id] if outcome.partner_id else [])]
    text = f"Rolled back {refinement_id}: new refinement {result.id} ({result.scope})."
    if len(ids) > 1:
        text += f" The other half of its promotion was rolled back too ({ids[1]})."
    if result.errors:
        text += " Some edits were not rolled back."
    return ActionResult(True, text, result.id, list(result.errors), refinement_ids=ids, via_session=via)


def refused_rollback(refinement_id: str, result: RefinementResult, force: bool) -> ActionResult:
    errors = list(result.errors)
    conflict = any("entry changed since refinement" in e for e in errors)
    hint = " Confirm with force to override." if conflict and not force else ""
    return ActionResult(
        False,
        f"Rollback of {refinement_id} was refused (recorded as {result.id}).{hint}",
        refinement_id=result.id,
        errors=errors,
        conflict=conflict,
    )


def held_reviewed(proposal_id: str, outcome: RefinementOutcome) -> ActionResult:
    """A decided cell's change to `.continual-acp/`: files written back or left, not a refinement."""
    if outcome.status == "rejected":
        return ActionResult(True, f"Rejected proposal {proposal_id}: the files stay as they were.")
    if outcome.status != "applied":
        return ActionResult(
            False, f"Proposal {proposal_id} was not fully applied.", None, list(outcome.errors)
        )
    return ActionResult(True, f"Applied proposal {proposal_id}: the cell's change is written back.")


def reviewed(proposal_id: str, decision: str, outcome: RefinementOutcome) -> ActionResult:
    """A proposal decided by a harness service of the panel's own."""
    if outcome.status == "rejected":
        ids = list(outcome.tombstones)
        return ActionResult(
            True,
            f"Rejected proposal {proposal_id}"
            + (" forever" if decision == "reject_forever" else "")
            + (f" (tombstones {', '.join(ids)})." if ids else "."),
            tombstones=ids,
        )
    rid, errors = outcome.refinement_id, list(outcome.errors)
    if outcome.status != "applied":
        return ActionResult(False, f"Proposal {proposal_id} was refused (recorded as {rid}).", rid, errors)
    return ActionResult(
        True,
        f"Applied proposal {proposal_id}: refinement {rid}.",
        rid,
        errors,
        refinement_ids=list(outcome.refinement_ids),
    )


def verified(kind: str, entry_id: str, outcome: RefinementOutcome) -> ActionResult:
    rid = outcome.refinement_id
    if outcome.status != "applied":
        return ActionResult(
            False, f"{kind} {entry_id} was not verified (recorded as {rid}).", rid, list(outcome.errors)
        )
    return ActionResult(True, f"Verified {kind} {entry_id}: refinement {rid}.", rid)


def deleted(kind: str, entry_id: str, result: RefinementResult, *, via: str | None) -> ActionResult:
    """`result` is the `RefinementResult` of the one-edit delete."""
    if not result.applied:
        return ActionResult(
            False,
            f"{kind} {entry_id} was not deleted (recorded as {result.id}).",
            result.id,
            list(result.errors),
        )
    return ActionResult(
        True, f"Deleted {kind} {entry_id}: refinement {result.id}.", result.id, via_session=via
    )


def promoted(kind: str, entry_id: str, target: str, done: Promotion, *, via: str | None) -> ActionResult:
    """`done` is the surface's promotion answer: the target's create and the local delete, or (a
    project target) the proposal that waits for review."""
    created = done.created
    if created is None:  # held for review: approving it applies both halves
        return ActionResult(
            True,
            f"The promotion of {kind} {entry_id} to the {target} harness waits for review: "
            f"proposal {done.proposal_id}.",
            via_session=via,
        )
    if not created.applied:
        return ActionResult(
            False,
            f"Could not promote {kind} {entry_id} to {target} (recorded as {created.id}); the local entry is unchanged.",
            created.id,
            list(created.errors),
            via_session=via,
        )
    ids = [created.id]
    text = f"Promoted {kind} {entry_id} to the {target} harness: refinement {created.id}."
    errors: list[str] = []
    if done.removed is not None and done.removed.applied:
        ids.append(done.removed.id)
        text += f" The local copy was removed: refinement {done.removed.id}."
    else:
        errors = list(done.removed.errors) if done.removed is not None else []
        text += " The local copy is still there."
    return ActionResult(True, text, created.id, errors, refinement_ids=ids, via_session=via)
