"""`Store`: the harness rules of one scope, written once over a `Backend` (backend.py).

Apply, rollback, review decisions, rejections before apply, tombstone lifts, the history with its
paging and as-of view, and "who wrote this entry later" live here; the backend only reads and
writes (`StateFileBackend` for a local or global scope, `RepositoryBackend` for a project). Every
read-modify-write holds the backend's cross-process lock and starts from the state read inside it.

`HarnessStore(root)` is the store of one local or global scope; `ProjectStore(repo)` (project.py)
the project scope's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path

from harness_store.backend import Backend
from harness_store.core import (
    ApplyOptions,
    EvidenceChecker,
    apply_proposal,
    plan_review,
    plan_rollback,
    replay,
)
from harness_store.curator import CurationPlan, curation_edits
from harness_store.follow_up import (
    apply_review,
    check_decision,
    check_trigger,
    follow_up_options,
    rolled_back_by,
)
from harness_store.ids import new_refinement_id, utc_now
from harness_store.lock import DEFAULT_TIMEOUT
from harness_store.models import (
    HarnessState,
    Proposal,
    RefinementResult,
    Tombstone,
    empty_entries,
)
from harness_store.statefile_backend import StateFileBackend
from harness_store.tombstones import lift_tombstone, reject_tombstones
from harness_store.validation import resolve_id
from harness_store.verify import PreApplyVerifier, needs_check, precheck

ProposalInput = Proposal | Mapping[str, object]


class RefinementNotFound(LookupError):
    """No history record with that id in this store."""

    def __init__(self, refinement_id: str, history_path: Path) -> None:
        super().__init__(f"no refinement {refinement_id} in {history_path}")
        self.refinement_id = refinement_id


def _as_checker(evidence: EvidenceChecker | Collection[str] | None) -> EvidenceChecker | None:
    if evidence is None or callable(evidence):
        return evidence
    known = frozenset(evidence)
    return known.__contains__


def _as_proposal(proposal: ProposalInput) -> Proposal:
    return proposal if isinstance(proposal, Proposal) else Proposal.model_validate(dict(proposal))


def _first_error(*columns: Sequence[str | None]) -> list[str | None]:
    """Per edit, the first reason of several that refuses it (None: allowed)."""
    return [next((reason for reason in row if reason), None) for row in zip(*columns, strict=True)]


class Store:
    """One scope's harness over `backend`; see the module docstring."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._mutex = threading.RLock()

    @property
    def root(self) -> Path:
        return self.backend.root

    @property
    def history_path(self) -> Path:
        return self.backend.history_path

    @property
    def lock_path(self) -> Path:
        return self.backend.lock_path

    @property
    def lock_timeout(self) -> float:
        return self.backend.lock_timeout

    @property
    def default_scope(self) -> str:
        """The scope of this store's records: `local`, `global` or `project`."""
        return self.backend.default_scope

    # -- reading --------------------------------------------------------------------------------

    def load(self) -> HarnessState:
        """The current state; never raises. A damaged state file is rebuilt from the history (the
        source of truth) and kept aside as `harness_state.json.damaged-<stamp>`, with a warning;
        a conflicted project entry is left out."""
        with self._mutex:
            return self.backend.read()

    @property
    def state(self) -> HarnessState:
        """The current state (cheap when nothing changed on disk since the last read)."""
        return self.load()

    def history(self, limit: int | None = None) -> list[RefinementResult]:
        """History records, oldest first / newest last; `limit` keeps the newest `limit`."""
        with self._mutex:
            if limit is not None and limit <= 0:
                return []
            count = self.backend.history_count()
            start = 0 if limit is None else max(count - limit, 0)
            return list(self.backend.history_records(start))

    def history_page(
        self, limit: int = 50, before: str | None = None
    ) -> tuple[list[RefinementResult], str | None]:
        """One page of history for cursor paging (newest last): the `limit` records older than
        `before` (or the newest ones), and the cursor for the next older page (None at the start).

        Raises `RefinementNotFound` when `before` is not a record of this store.
        """
        with self._mutex:
            end = self.backend.history_count()
            if before is not None:
                position = self.backend.history_position(before)
                if position is None:
                    raise RefinementNotFound(before, self.history_path)
                end = position
            start = max(end - max(limit, 0), 0)
            records = list(self.backend.history_records(start, end))
            return records, (records[0].id if start > 0 and records else None)

    def get_refinement(self, refinement_id: str) -> RefinementResult | None:
        """The history record with this id, or None."""
        with self._mutex:
            return self.backend.history_get(refinement_id)

    def state_as_of(self, refinement_id: str) -> HarnessState:
        """The entries as they were right after `refinement_id` (replayed from history)."""
        with self._mutex:
            position = self.backend.history_position(refinement_id)
            if position is None:
                raise RefinementNotFound(refinement_id, self.history_path)
            records = self.backend.history_records(0, position + 1)
            return HarnessState.build(replay(empty_entries(), records), head=refinement_id)

    def rolled_back_by(self, refinement_id: str) -> str | None:
        """The id of the applied rollback that currently undoes `refinement_id`, or None (never
        rolled back, or its rollback was itself rolled back since)."""
        with self._mutex:
            return rolled_back_by(self.backend.history_records(), refinement_id)

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone of this store."""
        return list(self.load().tombstones)

    def view_path(self, kind: str, entry_id: str, *, scope: str | None = None) -> Path:
        """The readable file of an entry (a markdown view, or a project entry's own file)."""
        with self._mutex:
            return self.backend.view_path(kind, entry_id, scope=scope)

    # -- writing --------------------------------------------------------------------------------

    def apply(
        self,
        proposal: ProposalInput,
        *,
        scope: str | None = None,
        trigger: str,
        session_id: str | None = None,
        baseline: HarnessState | None = None,
        global_state: HarnessState | None = None,
        evidence_checker: EvidenceChecker | Collection[str] | None = None,
        source: str | None = None,
        verifier: PreApplyVerifier | None = None,
    ) -> RefinementResult:
        """Lock, re-read, validate, apply, append history, save atomically; one result per proposal.

        `scope` defaults to the store's own. `verifier` checks each skill the proposal creates or
        updates before it is written (run before the lock is taken; a failing check refuses that
        edit; see harness_store/verify.py).

        `evidence_checker` (a callable or a set of transcript message ids) makes apply refuse edits
        citing messages that do not exist; the store itself cannot read transcripts.
        `global_state` lets a local refinement refuse updates/deletes of global ids by name.
        Edits of entries the backend blocks (project merge conflicts) or its rules refuse are
        refused with the reason.
        """
        scope = scope if scope is not None else self.default_scope
        self.backend.check_scope(scope)
        check_trigger(trigger)
        if source is not None and source not in ("refine", "agent", "user"):
            raise ValueError(f"source must be 'refine', 'agent' or 'user', not {source!r}")
        proposal = _as_proposal(proposal)
        # Slow skill checks run on a dry run before the lock; their verdicts are reused inside.
        verdicts = None
        if verifier is not None and needs_check(proposal):
            probe = ApplyOptions(
                refinement_id="precheck", now=utc_now(), scope=scope, trigger=trigger, source=source
            )
            verdicts = precheck(self.load(), proposal, probe, verifier)
        with self._mutex, self.backend.locked():
            snapshot = self.backend.snapshot_locked()
            opts = ApplyOptions(
                refinement_id=new_refinement_id(),
                now=utc_now(),
                scope=scope,
                trigger=trigger,
                session_id=session_id,
                baseline=baseline,
                global_state=global_state,
                evidence_checker=_as_checker(evidence_checker),
                source=source,
                # Blocked entries first, then the backend's rule: both refuse with a reason.
                preset_errors=_first_error(
                    self._blocked_errors(proposal, snapshot.blocked),
                    self.backend.rule_errors(proposal, source=source, trigger=trigger),
                ),
                pre_apply=verdicts.hook() if verdicts is not None else None,
            )
            new_state, result = apply_proposal(snapshot.state, proposal, opts)
            self.backend.commit_locked(snapshot.state, new_state, result)
            return result

    @staticmethod
    def _blocked_errors(proposal: Proposal, blocked: Mapping[tuple[str, str], str]) -> list[str | None]:
        return [blocked.get((edit.kind, resolve_id(edit) or "")) for edit in proposal.edits]

    def rollback(
        self, refinement_id: str, *, force: bool = False, trigger: str = "rollback"
    ) -> RefinementResult:
        """Undo a refinement by applying its inverse (itself a refinement that can be rolled back).

        Refused (not raised) when an entry changed since that refinement, unless `force`, and for
        entries the backend blocks. Raises `RefinementNotFound` for an unknown id.
        """
        check_trigger(trigger)
        with self._mutex, self.backend.locked():
            snapshot = self.backend.snapshot_locked()
            target = self._target(refinement_id)
            plan = plan_rollback(
                snapshot.state, target, force=force, later_writer=self._later_writer_after(target.id)
            )
            blocked = self._blocked_errors(plan.proposal, snapshot.blocked)
            opts = follow_up_options(
                target,
                trigger,
                rollback_of=target.id,
                restores=plan.restores,
                preset_errors=_first_error(plan.conflicts or [None] * len(blocked), blocked),
                scope=self.backend.follow_up_scope,
            )
            new_state, result = apply_proposal(snapshot.state, plan.proposal, opts)
            self.backend.commit_locked(snapshot.state, new_state, result)
            return result

    def curate(
        self, plan: CurationPlan, *, trigger: str = "user", session_id: str | None = None
    ) -> RefinementResult:
        """Apply a curator pass (harness_store/curator.py) as ONE history record, so one rollback
        undoes it. Each action is re-checked against the state read under the lock: an entry that
        changed since the dry run, a person's entry, or a merge whose target is missing or not
        verified is refused with the reason (nothing archived for it); nothing is ever deleted."""
        check_trigger(trigger)
        with self._mutex, self.backend.locked():
            snapshot = self.backend.snapshot_locked()
            pass_id = new_refinement_id()
            now = utc_now()
            planned = curation_edits(snapshot.state, plan, pass_id=pass_id, now=now)
            opts = ApplyOptions(
                refinement_id=pass_id,
                now=now,
                scope=self.default_scope,
                trigger=trigger,
                session_id=session_id,
                source="user" if trigger in ("user", "cli") else "refine",
                restores=planned.restores,
                preset_errors=_first_error(
                    planned.errors, self._blocked_errors(planned.proposal, snapshot.blocked)
                ),
            )
            new_state, result = apply_proposal(snapshot.state, planned.proposal, opts)
            self.backend.commit_locked(snapshot.state, new_state, result)
            return result

    def _target(self, refinement_id: str) -> RefinementResult:
        """The history record a follow-up acts on; `RefinementNotFound` for an unknown id."""
        target = self.backend.history_get(refinement_id)
        if target is None:
            raise RefinementNotFound(refinement_id, self.history_path)
        return target

    def _later_writer_after(self, target_id: str) -> Callable[[str, str], str | None]:
        def later_writer(kind: str, entry_id: str) -> str | None:
            # Only on a conflict (rare): scan the records after the target for the newest writer.
            position = self.backend.history_position(target_id)
            if position is None:
                return None
            newest: str | None = None
            for record in self.backend.history_records(position + 1):
                if any(e.applied and e.kind == kind and e.id == entry_id for e in record.applied_edits):
                    newest = record.id
            return newest

        return later_writer

    def record_review(
        self, refinement_id: str, decision: str, *, edit_ids: Iterable[str] | None = None
    ) -> RefinementResult:
        """Record a review decision on an applied refinement (one history record, trigger `user`).

        `apply`: its candidate entries become verified. `reject`: its entries become `rejected` (kept
        for the record, never in the prompt) and their content is tombstoned.
        `reject_forever`: as reject, and the tombstone also blocks the entry id. `edit_ids` limits the
        decision to some entry ids. Raises `RefinementNotFound` for an unknown id.
        """
        check_decision(decision)
        with self._mutex, self.backend.locked():
            snapshot = self.backend.snapshot_locked()
            target = self._target(refinement_id)
            plan = plan_review(snapshot.state, target, decision, edit_ids)
            opts = follow_up_options(
                target,
                "user",
                review_of=target.id,
                restores=plan.restores,
                scope=self.backend.follow_up_scope,
            )
            new_state, result = apply_review(snapshot.state, plan, opts)
            self.backend.commit_locked(snapshot.state, new_state, result)
            return result

    def reject_proposal(
        self,
        proposal: ProposalInput,
        *,
        forever: bool = False,
        reason: str = "rejected in review",
    ) -> list[Tombstone]:
        """Tombstone the content of a proposal that was rejected before it was ever applied.

        The tombstones are made durable by the backend (a history record of their own with no
        edits, `tombstoned`, so a state rebuilt from the history keeps them; or the project's
        tombstone file). Returns the tombstones added (already present ones are not repeated; one
        upgraded to `forever` is recorded but not returned).
        """
        proposal = _as_proposal(proposal)
        with self._mutex, self.backend.locked():
            tombstones, added, changed = reject_tombstones(
                self.backend.tombstones_locked(), proposal, forever=forever, reason=reason
            )
            if changed:
                summary = f"Rejected{' forever' if forever else ''} before apply: {proposal.summary}"
                self.backend.save_tombstones_locked(
                    tombstones, summary=summary.rstrip(": "), tombstoned=changed
                )
            return added

    def lift_tombstone(self, tombstone_id: str, *, trigger: str = "user") -> Tombstone | None:
        """Remove a tombstone so its content may be proposed again; returns it, or None if unknown.

        The lift is made durable by the backend (a history record with no edits, `lifted`, so a
        rebuilt state keeps it lifted; or the project's tombstone file).
        """
        check_trigger(trigger)
        with self._mutex, self.backend.locked():
            rest, lifted = lift_tombstone(self.backend.tombstones_locked(), tombstone_id)
            if lifted is not None:
                self.backend.save_tombstones_locked(
                    rest,
                    summary=f"Lifted tombstone {lifted.id} ({lifted.kind})",
                    lifted=[lifted],
                    trigger=trigger,
                )
            return lifted


class HarnessStore(Store):
    """The store of one scope, rooted at `root` (`<home>/harness` or `<home>/sessions/<id>/harness`)."""

    backend: StateFileBackend

    def __init__(self, root: Path | str, *, lock_timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(StateFileBackend(root, lock_timeout=lock_timeout))

    @property
    def state_path(self) -> Path:
        return self.backend.state_path
