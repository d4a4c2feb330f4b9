"""What the panel does to the harness: the one place its actions reach the stores.

Each action runs the same store calls the slash commands make, so the history records it exactly
as if `/rollback`, `/review` or a user's harness write had done it, and a running session sees the
result (every read of a store re-reads the files when they changed):

* rollback      -> `/rollback` (acp_server/commands.py): already-rolled-back check, then
                   `store.rollback(id, force=..., trigger="rollback")`; a conflict comes back refused.
* review        -> `/review` for a proposal on disk (coordinator.decide): removing the pending file
                   is the claim; reject -> `reject_proposal` (tombstones); apply -> `apply` with the
                   planning baseline, the transcript's message ids as evidence checker, then
                   `record_review(id, "apply")` so a human-approved candidate becomes verified.
* verify        -> review of an applied refinement by its id (`record_review(..., "apply",
                   edit_ids=[entry])`) on the refinement that last wrote the entry.
* delete        -> a user-written proposal with one delete edit (trigger `user`).

When the typed two-scope harness facade lands in agent_core/refinement, point these functions at it
(one module to change). They block (file locks): call them from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from acp_server.panel.sources import GLOBAL, PanelData, PanelQueryError, proposer_of

DECISIONS = ("apply", "reject", "reject_forever")


@dataclass
class ActionResult:
    """The outcome the page shows: ok, the new refinement id (if any), and what was refused."""

    ok: bool
    message: str
    refinement_id: str | None = None
    errors: list[str] = field(default_factory=list)
    conflict: bool = False  # a rollback refused because entries changed since (force may override)
    tombstones: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "message": self.message,
            "refinement_id": self.refinement_id,
            "errors": self.errors,
            "conflict": self.conflict,
            "tombstones": self.tombstones,
        }


class PanelActions:
    """The panel's write actions over the stores of one data home."""

    def __init__(self, data: PanelData) -> None:
        self.data = data

    def rollback(self, refinement_id: str, *, force: bool = False) -> ActionResult:
        """Roll back a refinement of any store (as `/rollback <id> [--force]`)."""
        view, _record = self.data.find_refinement(refinement_id)
        later = view.store.rolled_back_by(refinement_id)
        if later is not None:  # answered before any write: no history record for a no-op
            return ActionResult(False, f"Refinement {refinement_id} was already rolled back by {later}.")
        result = view.store.rollback(refinement_id, force=force, trigger="rollback")
        errors = list(result.errors)
        if errors and not result.applied:
            conflict = any("entry changed since refinement" in e for e in errors)
            hint = " Confirm with force to override." if conflict and not force else ""
            return ActionResult(
                False,
                f"Rollback of {refinement_id} was refused (recorded as {result.id}).{hint}",
                refinement_id=result.id,
                errors=errors,
                conflict=conflict,
            )
        text = f"Rolled back {refinement_id}: new refinement {result.id} ({result.scope})."
        if errors:
            text += " Some edits were not rolled back."
        return ActionResult(True, text, refinement_id=result.id, errors=errors)

    def review(self, proposal_id: str, decision: str, *, store_key: str) -> ActionResult:
        """Decide a proposal waiting on disk (as `/review` or `_harness/review`)."""
        from agent_core.refinement.pending_files import PendingFiles

        if decision not in DECISIONS:
            raise PanelQueryError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
        directory = self.data.root_of(store_key) / "pending"
        files = PendingFiles(directory)
        proposer = proposer_of(directory, proposal_id)
        pending = files.load(proposal_id)
        if pending is None:
            raise PanelQueryError(
                f"no proposal {proposal_id!r} waits for review in the {store_key} store", 404
            )
        # Removing the file is the claim (as in the coordinator): decided once, by one route.
        if not files.remove(proposal_id):
            return ActionResult(False, f"Proposal {proposal_id} was already decided elsewhere.")
        view = self.data.view(store_key)
        store = view.store
        if decision in ("reject", "reject_forever"):
            stones = store.reject_proposal(
                pending.proposal,
                forever=decision == "reject_forever",
                reason=f"{decision} in review of proposal {proposal_id}",
            )
            ids = [s.id for s in stones]
            return ActionResult(
                True,
                f"Rejected proposal {proposal_id}"
                + (" forever" if decision == "reject_forever" else "")
                + (f" (tombstones {', '.join(ids)})." if ids else "."),
                tombstones=ids,
            )
        kwargs: dict[str, Any] = {
            "scope": pending.scope,
            "trigger": pending.trigger,
            "session_id": proposer,
            "baseline": pending.baseline,
            "source": pending.source,
        }
        if proposer is not None:  # cited ids must exist in the proposing session's transcript
            kwargs["evidence_checker"] = self.data.evidence.message_ids(proposer).__contains__
        if pending.scope == "local":
            kwargs["global_state"] = self.data.view(GLOBAL).store.load()
        result = store.apply(pending.proposal, **kwargs)
        if result.applied and pending.trigger != "user":
            store.record_review(result.id, "apply")  # approved by a human: candidate -> verified
        errors = list(result.errors)
        if not result.applied:
            return ActionResult(
                False, f"Proposal {proposal_id} was refused (recorded as {result.id}).", result.id, errors
            )
        return ActionResult(
            True, f"Applied proposal {proposal_id}: refinement {result.id}.", result.id, errors
        )

    def verify(self, store_key: str, kind: str, entry_id: str) -> ActionResult:
        """Mark an entry verified: approve, in review, the refinement that last wrote it."""
        view = self.data.view(store_key)
        with self.data._lock:
            view.sync()
        entry = view.store.load().get(kind, entry_id)
        if entry is None:
            raise PanelQueryError(f"no {kind} entry {entry_id!r} in the {store_key} store", 404)
        if entry.trust == "verified":
            return ActionResult(False, f"{kind} {entry_id} is already verified.")
        writer = view.last_writer.get((kind, entry_id))
        if writer is None:
            return ActionResult(False, f"No refinement in the history wrote {kind} {entry_id}.")
        result = view.store.record_review(writer, "apply", edit_ids=[entry_id])
        if not result.applied:
            return ActionResult(
                False,
                f"{kind} {entry_id} was not verified (recorded as {result.id}).",
                result.id,
                list(result.errors),
            )
        return ActionResult(True, f"Verified {kind} {entry_id}: refinement {result.id}.", result.id)

    def delete(self, store_key: str, kind: str, entry_id: str) -> ActionResult:
        """Delete an entry with a user-written refinement (it can be rolled back like any other)."""
        from agent_core import Proposal

        view = self.data.view(store_key)
        proposal = Proposal.model_validate(
            {
                "summary": f"Delete {kind} {entry_id} (review panel)",
                "rationale": "Deleted by the user in the review panel.",
                "edits": [{"action": "delete", "kind": kind, "id": entry_id}],
            }
        )
        apply = partial(view.store.apply, proposal, scope=view.scope, trigger="user", source="user")
        result = apply(session_id=view.session_id)
        if not result.applied:
            return ActionResult(
                False,
                f"{kind} {entry_id} was not deleted (recorded as {result.id}).",
                result.id,
                list(result.errors),
            )
        return ActionResult(True, f"Deleted {kind} {entry_id}: refinement {result.id}.", result.id)
