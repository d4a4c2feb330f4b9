"""`HarnessStore`: one scope's store on disk (state file + history + views), safe across processes.

Every read-modify-write runs under the store lock and re-reads the state inside it. The write
order is history first, then state: a crash between the two leaves a history record the state does
not include yet, and the next reader rolls the state forward from the history (write-ahead log).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness_store.core import (
    ApplyOptions,
    EvidenceChecker,
    apply_proposal,
    plan_review,
    plan_rollback,
    replay,
)
from harness_store.errors import HarnessStoreError
from harness_store.follow_up import (
    apply_review,
    check_decision,
    check_trigger,
    follow_up_options,
    rolled_back_by,
)
from harness_store.history import HistoryLog
from harness_store.ids import new_refinement_id, utc_now
from harness_store.lock import DEFAULT_TIMEOUT, StoreLock, held_elsewhere
from harness_store.models import (
    HarnessState,
    Proposal,
    RefinementResult,
    Tombstone,
    empty_entries,
)
from harness_store.paths import HISTORY_FILE, LOCK_FILE, STATE_FILE, ensure_dir
from harness_store.recovery import rebuild_state, replay_tombstones, set_aside
from harness_store.statefile import load_state, peek_token, remove_stale_temps, save_state
from harness_store.tombstones import lift_tombstone, reject_tombstones
from harness_store.verify import PreApplyVerifier, needs_check, precheck  # trust (issue 15)
from harness_store.views import remove_view, view_path, write_view

log = logging.getLogger("harness_store")


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


class HarnessStore:
    """The store of one scope, rooted at `root` (`<home>/harness` or `<home>/sessions/<id>/harness`)."""

    def __init__(self, root: Path | str, *, lock_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.root = Path(root)
        self.state_path = self.root / STATE_FILE
        self.history_path = self.root / HISTORY_FILE
        self.lock_path = self.root / LOCK_FILE
        self.lock_timeout = lock_timeout
        self._history = HistoryLog(self.history_path)
        self._mutex = threading.RLock()
        # (file save token, last history id) -> state: lets repeated reads skip parsing and replay.
        self._cache_key: tuple[str | None, str | None] | None = None
        self._cache: HarnessState | None = None
        self._file_token: str | None = None
        self._file_state: HarnessState | None = None
        self._file_damaged = False
        # True while this object holds the store lock (its reads are then never mid-commit).
        self._writing = False

    @property
    def default_scope(self) -> str:
        """`local` for a session's store (`.../sessions/<id>/harness`), else `global`."""
        parent = self.root.parent.parent
        return "local" if self.root.name == "harness" and parent.name == "sessions" else "global"

    # -- reading --------------------------------------------------------------------------------

    def load(self) -> HarnessState:
        """The current state; never raises. A damaged state file is rebuilt from the history (the
        source of truth) and kept aside as `harness_state.json.damaged-<stamp>`, with a warning."""
        with self._mutex:
            return self._current()

    @property
    def state(self) -> HarnessState:
        """The current state (cheap when nothing changed on disk since the last read)."""
        return self.load()

    def _current(self) -> HarnessState:
        token = peek_token(self.state_path)
        last = self._history.last_id()
        if self._cache is not None and token is not None and self._cache_key == (token, last):
            return self._cache
        if token is None or token != self._file_token or self._file_state is None:
            loaded = load_state(self.state_path)
            if loaded.damaged:
                self._file_token, self._file_state, self._file_damaged = None, None, True
                state = self._recover(loaded.state)
                self._cache_key, self._cache = (self._file_token, self._history.last_id()), state
                return state
            self._file_token, self._file_state, self._file_damaged = (
                loaded.token,
                loaded.state,
                loaded.damaged,
            )
            missing = not loaded.damaged and not self.state_path.exists()
        else:
            missing = False
        state = self._file_state
        assert state is not None
        if last is not None and last != state.head and not self._file_damaged:
            try:
                state = self._roll_forward(state, missing)
            except HarnessStoreError as exc:  # load() never raises: serve the file as it is
                log.warning("harness state %s not rolled forward: %s", self.state_path, exc)
        self._cache_key, self._cache = (self._file_token, last), state
        return state

    def _recover(self, salvaged: HarnessState) -> HarnessState:
        """The state rebuilt from the history for a damaged state file, repaired on disk if the
        store lock can be had right now (always when this object holds it)."""
        try:
            state = rebuild_state(salvaged, list(self._history.records()))
        except HarnessStoreError as exc:  # load() never raises: serve what the file still had
            log.warning("harness state %s is damaged and its history unreadable: %s", self.state_path, exc)
            return salvaged
        if self._writing:
            self._repair_locked(state)
            return state
        try:
            with StoreLock(self.lock_path, timeout=0):
                self._writing = True
                try:
                    # Re-check inside the lock: another process may have repaired it meanwhile.
                    loaded = load_state(self.state_path)
                    if not loaded.damaged:
                        return self._current()
                    state = rebuild_state(loaded.state, list(self._history.records()))
                    self._repair_locked(state)
                finally:
                    self._writing = False
        except HarnessStoreError as exc:
            # Lock busy or the directory is not writable: serve the rebuilt state; a later
            # read or write repairs the file.
            log.debug("harness state %s not repaired yet: %s", self.state_path, exc)
        return state

    def _repair_locked(self, state: HarnessState) -> None:
        """With the store lock held: keep the damaged file aside and save the rebuilt state."""
        try:
            aside = set_aside(self.state_path)
            token = save_state(self.state_path, state)
        except (OSError, HarnessStoreError) as exc:
            log.warning(
                "harness state %s is damaged and could not be repaired (%s); serving the state "
                "rebuilt from %s",
                self.state_path,
                exc,
                self.history_path,
            )
            return
        log.warning(
            "harness state %s was damaged; rebuilt %d entries and %d tombstones from %s%s",
            self.state_path,
            state.count(),
            len(state.tombstones),
            self.history_path,
            f"; the damaged file is kept as {aside}" if aside is not None else "",
        )
        self._file_token, self._file_state, self._file_damaged = token, state, False

    def _roll_forward(self, state: HarnessState, missing: bool) -> HarnessState:
        # The history has records the state file does not include: a writer died between the two
        # writes. Replay their `after` snapshots (or the whole history when the file is missing).
        if state.head is None:
            if not missing:
                return state
            start = 0
        else:
            position = self._history.position(state.head)
            if position is None:
                return state  # the state does not come from this history: leave it alone
            start = position + 1
        records = list(self._history.records(start))
        if not records:
            return state
        # Read without the lock, this is normal while another process is between its history
        # append and its state save; only a gap nobody is filling means a writer crashed.
        in_progress = not self._writing and held_elsewhere(self.lock_path)
        log.log(
            logging.DEBUG if in_progress else logging.WARNING,
            "harness state %s was behind its history by %d record(s)%s; rolled forward",
            self.state_path,
            len(records),
            " (another process is saving)" if in_progress else "",
        )
        tombstones = replay_tombstones(list(state.tombstones), records)
        return HarnessState.build(replay(state.entries, records), tombstones, head=records[-1].id)

    def history(self, limit: int | None = None) -> list[RefinementResult]:
        """History records, oldest first / newest last; `limit` keeps the newest `limit`."""
        with self._mutex:
            if limit is not None and limit <= 0:
                return []
            count = len(self._history)
            start = 0 if limit is None else max(count - limit, 0)
            return list(self._history.records(start))

    def history_page(
        self, limit: int = 50, before: str | None = None
    ) -> tuple[list[RefinementResult], str | None]:
        """One page of history for cursor paging (newest last): the `limit` records older than
        `before` (or the newest ones), and the cursor for the next older page (None at the start).

        Raises `RefinementNotFound` when `before` is not a record of this store.
        """
        with self._mutex:
            ids = self._history.ids()
            end = len(ids)
            if before is not None:
                position = self._history.position(before)
                if position is None:
                    raise RefinementNotFound(before, self.history_path)
                end = position
            start = max(end - max(limit, 0), 0)
            records = list(self._history.records(start, end))
            return records, (ids[start] if start > 0 and records else None)

    def get_refinement(self, refinement_id: str) -> RefinementResult | None:
        """The history record with this id, or None."""
        with self._mutex:
            return self._history.get(refinement_id)

    def state_as_of(self, refinement_id: str) -> HarnessState:
        """The entries as they were right after `refinement_id` (replayed from history; beyond 8)."""
        with self._mutex:
            position = self._history.position(refinement_id)
            if position is None:
                raise RefinementNotFound(refinement_id, self.history_path)
            records = self._history.records(0, position + 1)
            return HarnessState.build(replay(empty_entries(), records), head=refinement_id)

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone of this store."""
        return list(self.load().tombstones)

    def view_path(self, kind: str, entry_id: str, *, scope: str | None = None) -> Path:
        """The markdown view file of an entry, written if missing (path of a future entry otherwise)."""
        with self._mutex:
            entry = self._current().get(kind, entry_id)
            if entry is None:
                return view_path(self.root, scope or self.default_scope, kind, entry_id)
            path = view_path(self.root, entry.scope, kind, entry_id)
            if not path.exists():
                write_view(self.root, entry)
            return path

    # -- writing --------------------------------------------------------------------------------

    def _prepare(self) -> None:
        try:
            ensure_dir(self.root)
        except OSError as exc:
            raise HarnessStoreError(
                f"cannot create the harness directory {self.root}: {exc.strerror}"
            ) from exc
        if not self.root.is_dir():
            raise HarnessStoreError(f"the harness path {self.root} is not a directory")

    def _commit(self, state: HarnessState, result: RefinementResult) -> None:
        """History first, then state (see module docstring); then the views of touched entries."""
        self._history.append(result)
        try:
            token = save_state(self.state_path, state)
        except HarnessStoreError as exc:
            # The record is durable in the history, which readers roll the state forward from:
            # the caller must not apply the same proposal again.
            raise HarnessStoreError(
                f"{exc}. Refinement {result.id} is recorded in {self.history_path} and takes effect "
                "from there (do not apply it again); the state file is rewritten by the next save"
            ) from exc
        self._file_token, self._file_state, self._file_damaged = token, state, False
        self._cache_key, self._cache = (token, result.id), state
        for edit in result.applied_edits:
            if not edit.applied:
                continue
            if edit.after is not None:
                write_view(self.root, edit.after)
            elif edit.before is not None:
                remove_view(self.root, edit.before)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[StoreLock]:
        self._prepare()
        with StoreLock(self.lock_path, self.lock_timeout) as held:
            self._writing = True
            try:
                yield held
            finally:
                self._writing = False

    def apply(
        self,
        proposal: Proposal | Mapping[str, Any],
        *,
        scope: str,
        trigger: str,
        session_id: str | None = None,
        baseline: HarnessState | None = None,
        global_state: HarnessState | None = None,
        evidence_checker: EvidenceChecker | Collection[str] | None = None,
        source: str | None = None,
        verifier: PreApplyVerifier | None = None,
    ) -> RefinementResult:
        """Lock, re-read, validate, apply, append history, save atomically; one result per proposal.

        `verifier` checks each skill the proposal creates or updates before it is written (run
        before the lock is taken; a failing check refuses that edit; see harness_store/verify.py).

        `evidence_checker` (a callable or a set of transcript message ids) makes apply refuse edits
        citing messages that do not exist; the store itself cannot read transcripts.
        `global_state` lets a local refinement refuse updates/deletes of global ids by name.
        """
        if scope not in ("local", "global"):
            raise ValueError(f"scope must be 'local' or 'global', not {scope!r}")
        check_trigger(trigger)
        if source is not None and source not in ("refine", "agent", "user"):
            raise ValueError(f"source must be 'refine', 'agent' or 'user', not {source!r}")
        if not isinstance(proposal, Proposal):
            proposal = Proposal.model_validate(dict(proposal))
        # trust (issue 15): slow skill checks run on a dry run before the lock, verdicts reused inside.
        verdicts = None
        if verifier is not None and needs_check(proposal):
            with self._mutex:
                unlocked = self._current()
            probe = ApplyOptions(
                refinement_id="precheck", now=utc_now(), scope=scope, trigger=trigger, source=source
            )
            verdicts = precheck(unlocked, proposal, probe, verifier)
        with self._mutex, self._locked():
            remove_stale_temps(self.state_path)
            state = self._current()
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
                pre_apply=verdicts.hook() if verdicts is not None else None,  # trust (issue 15)
            )
            new_state, result = apply_proposal(state, proposal, opts)
            self._commit(new_state, result)
            return result

    def rollback(
        self, refinement_id: str, *, force: bool = False, trigger: str = "rollback"
    ) -> RefinementResult:
        """Undo a refinement by applying its inverse (itself a refinement that can be rolled back).

        Refused (not raised) when an entry changed since that refinement, unless `force`.
        Raises `RefinementNotFound` for an unknown id.
        """
        check_trigger(trigger)
        with self._mutex, self._locked():
            state, target = self._target_locked(refinement_id)
            plan = plan_rollback(state, target, force=force, later_writer=self._later_writer_after(target.id))
            opts = follow_up_options(
                target, trigger, rollback_of=target.id, restores=plan.restores, preset_errors=plan.conflicts
            )
            new_state, result = apply_proposal(state, plan.proposal, opts)
            self._commit(new_state, result)
            return result

    def rolled_back_by(self, refinement_id: str) -> str | None:
        """The id of the applied rollback that currently undoes `refinement_id`, or None (never
        rolled back, or its rollback was itself rolled back since)."""
        with self._mutex:
            return rolled_back_by(self._history.records(), refinement_id)

    def _target_locked(self, refinement_id: str) -> tuple[HarnessState, RefinementResult]:
        """With the store lock held: the current state and the history record a follow-up acts on."""
        remove_stale_temps(self.state_path)
        state = self._current()
        target = self._history.get(refinement_id)
        if target is None:
            raise RefinementNotFound(refinement_id, self.history_path)
        return state, target

    def _later_writer_after(self, target_id: str) -> Callable[[str, str], str | None]:
        def later_writer(kind: str, entry_id: str) -> str | None:
            # Only on a conflict (rare): scan the records after the target for the newest writer.
            position = self._history.position(target_id)
            if position is None:
                return None
            newest: str | None = None
            for record in self._history.records(position + 1):
                if any(e.applied and e.kind == kind and e.id == entry_id for e in record.applied_edits):
                    newest = record.id
            return newest

        return later_writer

    def record_review(
        self, refinement_id: str, decision: str, *, edit_ids: Iterable[str] | None = None
    ) -> RefinementResult:
        """Record a review decision on an applied refinement (one history record, trigger `user`).

        `apply`: its candidate entries become verified. `reject`: its entries become `rejected` (kept
        for the record, never in the prompt) and their content is tombstoned (beyond 5).
        `reject_forever`: as reject, and the tombstone also blocks the entry id. `edit_ids` limits the
        decision to some entry ids. Raises `RefinementNotFound` for an unknown id.
        """
        check_decision(decision)
        with self._mutex, self._locked():
            state, target = self._target_locked(refinement_id)
            plan = plan_review(state, target, decision, edit_ids)
            opts = follow_up_options(target, "user", review_of=target.id, restores=plan.restores)
            new_state, result = apply_review(state, plan, opts)
            self._commit(new_state, result)
            return result

    def reject_proposal(
        self,
        proposal: Proposal | Mapping[str, Any],
        *,
        forever: bool = False,
        reason: str = "rejected in review",
    ) -> list[Tombstone]:
        """Tombstone the content of a proposal that was rejected before it was ever applied.

        The tombstones are a history record of their own (no edits, `tombstoned`), so a state
        rebuilt from the history keeps them. Returns the tombstones added (already present ones are
        not repeated; one upgraded to `forever` is recorded but not returned).
        """
        if not isinstance(proposal, Proposal):
            proposal = Proposal.model_validate(dict(proposal))
        with self._mutex, self._locked():
            state = self._current()
            tombstones, added, changed = reject_tombstones(
                list(state.tombstones), proposal, forever=forever, reason=reason
            )
            if changed:
                summary = f"Rejected{' forever' if forever else ''} before apply: {proposal.summary}"
                record = self._tombstone_record(summary.rstrip(": "), tombstoned=changed)
                self._commit(HarnessState.build(state.entries, tombstones, head=record.id), record)
            return added

    def lift_tombstone(self, tombstone_id: str, *, trigger: str = "user") -> Tombstone | None:
        """Remove a tombstone so its content may be proposed again; returns it, or None if unknown.

        The lift is a history record (no edits, `lifted`), so a rebuilt state keeps it lifted.
        """
        check_trigger(trigger)
        with self._mutex, self._locked():
            state = self._current()
            rest, lifted = lift_tombstone(list(state.tombstones), tombstone_id)
            if lifted is not None:
                record = self._tombstone_record(
                    f"Lifted tombstone {lifted.id} ({lifted.kind})", lifted=[lifted], trigger=trigger
                )
                self._commit(HarnessState.build(state.entries, rest, head=record.id), record)
            return lifted

    def _tombstone_record(
        self,
        summary: str,
        *,
        tombstoned: Sequence[Tombstone] = (),
        lifted: Sequence[Tombstone] = (),
        trigger: str = "user",
    ) -> RefinementResult:
        """A history record that only adds or lifts tombstones (see `RefinementResult.tombstoned`)."""
        return RefinementResult.model_validate(
            {
                "id": new_refinement_id(),
                "summary": summary,
                "scope": self.default_scope,
                "trigger": trigger,
                # A local store's records belong to its session (`.../sessions/<id>/harness`).
                "session_id": self.root.parent.name if self.default_scope == "local" else None,
                "created_at": utc_now(),
                "tombstoned": list(tombstoned),
                "lifted": list(lifted),
            }
        )
