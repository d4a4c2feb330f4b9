"""`ProjectStore`: the harness of one repository, committed with its code (the `project` scope).

Layout under `<repo>/.continual-acp/harness/`:

* `entries/<kind>/<id>.md` — one reviewable text file per entry (project_files.py), so the
  `git diff` of a refinement shows what it changed and a pull request can review it;
* `history.jsonl` — append-only, one record per refinement (project_history.py); every
  record also names, per entry it wrote, the record that wrote that entry before (`parents`);
* `tombstones.jsonl` — rejected content, one per line;
* `.gitattributes` (`merge=union` for the two logs, so concurrent appends merge without conflict
  markers) and `.gitignore` (the lock and temp files).

The entry files are the current state; the history is the audit trail and what rollback, the as-of
view and conflict detection read. Writes go history first, then files: if a writer dies between
the two, every reader sees the last record's entries (its files still equal its `before`
snapshots) and the next locked write rewrites the files. Files that moved on since (a merge, a
hand edit) or hold conflict markers are never overwritten this way; deleting an entry's file by
hand right after its create does count as "behind" (delete through the store instead). The API is `HarnessStore`'s (load/state/apply/rollback/history/
history_page/get_refinement/state_as_of/record_review/reject_proposal/tombstones/lift_tombstone/
view_path/rolled_back_by), so a caller can treat it as a third store; `apply` only accepts
`scope="project"`.

**When refinements meet in git.** After a merge or rebase the store loads the merged files. An entry
changed on both sides is a *conflict*, never silently picked: either its file holds git conflict
markers, or two history records wrote it from the same parent record (a fork; the text merge may
have been clean). A conflicted entry is left out of `load()` (it cannot reach the prompt), refuses
further edits, and is listed by `conflicts()` with each side's version for `/review`;
`resolve_conflict` writes the chosen side as a new refinement, which ends the conflict. The
history stays append-only throughout: both sides' records are kept, the resolution is appended.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_store import write_listeners
from harness_store.core import (
    _SOURCE_BY_TRIGGER,
    ApplyOptions,
    EvidenceChecker,
    apply_proposal,
    edit_from,
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
from harness_store.ids import new_refinement_id, utc_now
from harness_store.lock import DEFAULT_TIMEOUT, StoreLock
from harness_store.models import (
    KINDS,
    Edit,
    HarnessEntry,
    HarnessState,
    Proposal,
    RefinementResult,
    Tombstone,
    empty_entries,
)
from harness_store.project_files import (
    EntryFileError,
    file_name,
    has_conflict_markers,
    parse_entry,
    render_entry,
    split_conflict,
    write_text_atomic,
)
from harness_store.project_history import ProjectHistory, after_of, entry_key
from harness_store.project_rules import rule_errors
from harness_store.tombstones import add_tombstone, lift_tombstone, reject_tombstones
from harness_store.validation import resolve_id
from harness_store.verify import PreApplyVerifier, needs_check, precheck

log = logging.getLogger("harness_store")

PROJECT_DIR = Path(".continual-acp") / "harness"
ENTRIES_DIR = "entries"
HISTORY_FILE = "history.jsonl"
TOMBSTONES_FILE = "tombstones.jsonl"
LOCK_FILE = ".lock"
GITATTRIBUTES = "history.jsonl merge=union\ntombstones.jsonl merge=union\n"
GITIGNORE = ".lock\n.*.tmp\npending/\n"  # pending reviews are per person, never committed
MSG_CONFLICTED = "entry has an unresolved merge conflict ({reason}); resolve it with /review"


def project_root(repo: Path | str) -> Path:
    """`<repo>/.continual-acp/harness`."""
    return Path(repo) / PROJECT_DIR


@dataclass(frozen=True)
class ProjectConflict:
    """An entry changed on both sides of a git merge: what each side holds, and why it is a conflict."""

    kind: str
    entry_id: str
    reason: str
    path: Path
    # Each side's version (None: that side deleted it); empty when the file cannot be read at all.
    candidates: tuple[HarnessEntry | None, ...] = ()
    refinements: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (for `_harness/*` and `--json`)."""
        return {
            "kind": self.kind,
            "id": self.entry_id,
            "reason": self.reason,
            "path": str(self.path),
            "candidates": [c.model_dump(mode="json") if c is not None else None for c in self.candidates],
            "refinements": list(self.refinements),
        }


class ProjectStore:
    """The project scope's store for the repository at `repo`."""

    def __init__(self, repo: Path | str, *, lock_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.repo = Path(repo)
        self.root = project_root(self.repo)
        self.entries_dir = self.root / ENTRIES_DIR
        self.history_path = self.root / HISTORY_FILE
        self.tombstones_path = self.root / TOMBSTONES_FILE
        self.lock_path = self.root / LOCK_FILE
        self.lock_timeout = lock_timeout
        self._mutex = threading.RLock()
        # path (a str: Path objects cost more than the stat) -> ((mtime_ns, size), parsed entry or
        # the file's text when it does not parse). Re-parsing happens only for files that changed.
        self._files: dict[str, tuple[tuple[int, int], HarnessEntry | str]] = {}
        self._history = ProjectHistory(self.history_path)
        self._written: list[Path] = []  # the files the current locked write touched (write_listeners)

    @property
    def default_scope(self) -> str:
        """Always `project`."""
        return "project"

    # -- reading the files ------------------------------------------------------------------------

    def _scan(self) -> tuple[dict[str, dict[str, HarnessEntry]], list[ProjectConflict]]:
        entries = empty_entries()
        broken: list[ProjectConflict] = []
        seen: set[str] = set()
        for kind in KINDS:
            directory = self.entries_dir / kind
            try:
                listing = list(os.scandir(directory))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise HarnessStoreError(
                    f"cannot read the project harness {directory}: {exc.strerror}"
                ) from exc
            for item in listing:
                if not item.name.endswith(".md") or item.name.startswith("."):
                    continue
                seen.add(item.path)
                parsed = self._read(item)
                if isinstance(parsed, HarnessEntry):
                    entries[kind][parsed.id] = parsed
                else:
                    broken.append(self._file_conflict(kind, Path(item.path), parsed))
        for stale in set(self._files) - seen:
            del self._files[stale]
        return entries, broken

    def _read(self, item: os.DirEntry[str]) -> HarnessEntry | str:
        path = item.path
        try:
            stat = item.stat()
        except OSError:
            return ""
        sig = (stat.st_mtime_ns, stat.st_size)
        cached = self._files.get(path)
        if cached is not None and cached[0] == sig:
            return cached[1]
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("project harness entry %s unreadable: %s", path, exc)
            text = ""
        value: HarnessEntry | str
        try:
            value = parse_entry(text) if not has_conflict_markers(text) else text
        except EntryFileError as exc:
            log.warning("project harness entry %s: %s", path, exc)
            value = text
        self._files[path] = (sig, value)
        return value

    def _file_conflict(self, kind: str, path: Path, text: str) -> ProjectConflict:
        from harness_store.project_files import id_from_file_name

        entry_id = id_from_file_name(path.name)
        if not has_conflict_markers(text):
            return ProjectConflict(kind, entry_id, "the entry file cannot be read as an entry", path)
        sides: list[HarnessEntry | None] = []
        for side in split_conflict(text):
            try:
                sides.append(parse_entry(side))
            except EntryFileError:
                continue
        if sides and isinstance(sides[0], HarnessEntry):
            entry_id = sides[0].id
        return ProjectConflict(kind, entry_id, "git conflict markers in the entry file", path, tuple(sides))

    # -- the public reading API -------------------------------------------------------------------

    def _interrupted(
        self, entries: dict[str, dict[str, HarnessEntry]], broken: set[tuple[str, str]]
    ) -> list[HarnessEntry | tuple[str, str]]:
        """The writes of the last record that never reached the files (a writer died between its
        history append and its file writes): every entry it wrote still equals its `before`.
        Returns the entries to write (or (kind, id) to delete); empty when nothing is missing."""
        if not self._history.lines:
            return []
        last = self._history.lines[-1].record
        final: dict[tuple[str, str], tuple[HarnessEntry | None, HarnessEntry | None]] = {}
        for edit in last.applied_edits:
            if edit.applied and edit.id is not None:
                first_before = final.get((edit.kind, edit.id), (edit.before, None))[0]
                final[(edit.kind, edit.id)] = (first_before, edit.after)
        missing: list[HarnessEntry | tuple[str, str]] = []
        for (kind, entry_id), (before, after) in final.items():
            if (kind, entry_id) in broken:
                return []  # a file with conflict markers is for /review, never overwritten
            current = entries.get(kind, {}).get(entry_id)
            if _same_entry(current, after):
                continue
            if not _same_entry(current, before):
                return []  # moved on since (a merge, a hand edit): the files are not behind
            missing.append(after if after is not None else (kind, entry_id))
        return missing

    def _snapshot(self, *, repair: bool = False) -> tuple[HarnessState, list[ProjectConflict]]:
        entries, conflicts = self._scan()
        self._history.refresh()
        # The history is the truth: replay a last record whose file writes were cut off.
        missing = self._interrupted(entries, {(c.kind, c.entry_id) for c in conflicts})
        if missing:
            log.warning(
                "project harness %s was behind its history (%s); rolled forward",
                self.root,
                self._history.lines[-1].record.id,
            )
            for item in missing:
                if isinstance(item, HarnessEntry):
                    entries[item.kind][item.id] = item
                    if repair:
                        self._written.append(self.view_path(item.kind, item.id))
                        write_text_atomic(self.view_path(item.kind, item.id), render_entry(item))
                else:
                    entries[item[0]].pop(item[1], None)
                    if repair:
                        self._written.append(self.view_path(*item))
                        with contextlib.suppress(FileNotFoundError):
                            self.view_path(*item).unlink()
        for key, (first, second) in self._history.forks().items():
            kind, _, entry_id = key.partition("/")
            if any(c.kind == kind and c.entry_id == entry_id for c in conflicts):
                continue
            sides = tuple(after_of(line, kind, entry_id) for line in (first, second))
            conflicts.append(
                ProjectConflict(
                    kind,
                    entry_id,
                    f"changed on both sides: {first.record.id} and {second.record.id}",
                    self.entries_dir / kind / file_name(entry_id),
                    sides,
                    (first.record.id, second.record.id),
                )
            )
        for conflict in conflicts:
            entries.get(conflict.kind, {}).pop(conflict.entry_id, None)
        head = self._history.lines[-1].record.id if self._history.lines else None
        return HarnessState.build(entries, self._read_tombstones(), head=head), conflicts

    def load(self) -> HarnessState:
        """The entries (conflicted ones left out), tombstones and head; never raises on a bad file."""
        with self._mutex:
            try:
                return self._snapshot()[0]
            except HarnessStoreError as exc:
                log.warning("%s", exc)
                return HarnessState()

    @property
    def state(self) -> HarnessState:
        """The current state (see `load`)."""
        return self.load()

    def conflicts(self) -> list[ProjectConflict]:
        """Entries changed on both sides of a git merge or rebase, for `/review` (sorted)."""
        with self._mutex:
            found = self._snapshot()[1]
        return sorted(found, key=lambda c: (c.kind, c.entry_id))

    def history(self, limit: int | None = None) -> list[RefinementResult]:
        """History records in file order (newest last); `limit` keeps the newest `limit`."""
        with self._mutex:
            self._history.refresh()
            records = [line.record for line in self._history.lines]
        if limit is not None:
            return records[-limit:] if limit > 0 else []
        return records

    def history_page(
        self, limit: int = 50, before: str | None = None
    ) -> tuple[list[RefinementResult], str | None]:
        """A page of history (newest last) older than `before`, and the cursor of the next page."""
        from harness_store.store import RefinementNotFound

        with self._mutex:
            self._history.refresh()
            end = len(self._history.lines)
            if before is not None:
                if before not in self._history.positions:
                    raise RefinementNotFound(before, self.history_path)
                end = self._history.positions[before]
            start = max(end - max(limit, 0), 0)
            records = [line.record for line in self._history.lines[start:end]]
            return records, (self._history.lines[start].record.id if start > 0 and records else None)

    def get_refinement(self, refinement_id: str) -> RefinementResult | None:
        """The history record with this id, or None."""
        with self._mutex:
            self._history.refresh()
            position = self._history.positions.get(refinement_id)
            return self._history.lines[position].record if position is not None else None

    def state_as_of(self, refinement_id: str) -> HarnessState:
        """The entries right after `refinement_id`, replayed from the history (file order)."""
        from harness_store.store import RefinementNotFound

        with self._mutex:
            self._history.refresh()
            position = self._history.positions.get(refinement_id)
            if position is None:
                raise RefinementNotFound(refinement_id, self.history_path)
            records = [line.record for line in self._history.lines[: position + 1]]
        return HarnessState.build(replay(empty_entries(), records), head=refinement_id)

    def rolled_back_by(self, refinement_id: str) -> str | None:
        """The applied rollback currently undoing `refinement_id`, or None."""
        return rolled_back_by(self.history(), refinement_id)

    def tombstones(self) -> list[Tombstone]:
        """Every tombstone of this store."""
        return list(self.load().tombstones)

    def view_path(self, kind: str, entry_id: str, *, scope: str | None = None) -> Path:
        """The entry's own file: in a project store the reviewable view *is* the stored text."""
        return self.entries_dir / kind / file_name(entry_id)

    def _read_tombstones(self) -> list[Tombstone]:
        stones: list[Tombstone] = []
        try:
            text = self.tombstones_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return stones
        except OSError as exc:
            log.warning("project tombstones %s unreadable: %s", self.tombstones_path, exc)
            return stones
        for raw in text.splitlines():
            try:
                stone = Tombstone.model_validate_json(raw)
            except ValueError:
                continue
            stones = add_tombstone(stones, stone)
        return stones

    # -- writing ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            for name, text in ((".gitattributes", GITATTRIBUTES), (".gitignore", GITIGNORE)):
                if not (self.root / name).exists():
                    write_text_atomic(self.root / name, text)
        except OSError as exc:
            raise HarnessStoreError(f"cannot create the project harness {self.root}: {exc.strerror}") from exc
        with StoreLock(self.lock_path, self.lock_timeout):
            self._written = [self.root / ".gitattributes", self.root / ".gitignore"]
            try:
                yield
            finally:
                # Still under the lock: a guard checking under it sees the write whole or not at all.
                written, self._written = self._written, []
                write_listeners.notify(self.root, written)

    def _commit(self, state: HarnessState, result: RefinementResult, tombstones_changed: bool) -> None:
        """History first (with each written entry's parent record), then the entry files."""
        writers = self._history.last_writers()
        parents = {
            entry_key(e.kind, e.id): writers.get(entry_key(e.kind, e.id))
            for e in result.applied_edits
            if e.applied and e.id is not None
        }
        try:
            self._written += [self.history_path, self.tombstones_path]
            self._history.append(result, parents)
            for edit in result.applied_edits:
                if not edit.applied or edit.id is None:
                    continue
                path = self.view_path(edit.kind, edit.id)
                self._written.append(path)
                if edit.after is not None:
                    write_text_atomic(path, render_entry(edit.after))
                    # What we just wrote needs no re-parse by our next read.
                    stat = path.stat()
                    self._files[str(path)] = ((stat.st_mtime_ns, stat.st_size), edit.after)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
            if tombstones_changed:
                self._write_tombstones(state.tombstones)
        except OSError as exc:
            raise HarnessStoreError(f"cannot write the project harness {self.root}: {exc.strerror}") from exc

    def rule_errors(
        self, proposal: Proposal, *, source: str | None, trigger: str = "auto"
    ) -> list[str | None]:
        """Per edit, why it breaks the project rule (project_rules.py: a refinement-written edit
        must be a fact about this repository), or None. `source` None: the trigger's default."""
        effective = source or _SOURCE_BY_TRIGGER.get(trigger, "agent")
        return rule_errors(proposal.edits, self.repo, effective)

    def _conflict_errors(self, proposal: Proposal, conflicts: list[ProjectConflict]) -> list[str | None]:
        blocked = {(c.kind, c.entry_id): c.reason for c in conflicts}
        errors: list[str | None] = []
        for edit in proposal.edits:
            reason = blocked.get((edit.kind, resolve_id(edit) or ""))
            errors.append(MSG_CONFLICTED.format(reason=reason) if reason else None)
        return errors

    def apply(
        self,
        proposal: Proposal | Mapping[str, Any],
        *,
        scope: str = "project",
        trigger: str,
        session_id: str | None = None,
        baseline: HarnessState | None = None,
        global_state: HarnessState | None = None,
        evidence_checker: EvidenceChecker | Collection[str] | None = None,
        source: str | None = None,
        verifier: PreApplyVerifier | None = None,
    ) -> RefinementResult:
        """As `HarnessStore.apply`; only `scope="project"`; conflicted entries refuse their edits."""
        if scope != "project":
            raise ValueError(f"a project store only accepts scope 'project', not {scope!r}")
        check_trigger(trigger)
        if source is not None and source not in ("refine", "agent", "user"):
            raise ValueError(f"source must be 'refine', 'agent' or 'user', not {source!r}")
        if not isinstance(proposal, Proposal):
            proposal = Proposal.model_validate(dict(proposal))
        checker: EvidenceChecker | None
        if evidence_checker is None or callable(evidence_checker):
            checker = evidence_checker
        else:
            checker = frozenset(evidence_checker).__contains__
        verdicts = None
        if verifier is not None and needs_check(proposal):
            probe = ApplyOptions(
                refinement_id="precheck", now=utc_now(), scope=scope, trigger=trigger, source=source
            )
            verdicts = precheck(self.load(), proposal, probe, verifier)
        with self._mutex, self._locked():
            state, conflicts = self._snapshot(repair=True)
            opts = ApplyOptions(
                refinement_id=new_refinement_id(),
                now=utc_now(),
                scope=scope,
                trigger=trigger,
                session_id=session_id,
                baseline=baseline,
                global_state=global_state,
                evidence_checker=checker,
                source=source,
                # Conflicts first, then the project rule (trust, issue 15): both refuse with a reason.
                preset_errors=[
                    c or r
                    for c, r in zip(
                        self._conflict_errors(proposal, conflicts),
                        self.rule_errors(proposal, source=source, trigger=trigger),
                        strict=True,
                    )
                ],
                pre_apply=verdicts.hook() if verdicts is not None else None,
            )
            new_state, result = apply_proposal(state, proposal, opts)
            self._commit(new_state, result, len(new_state.tombstones) != len(state.tombstones))
            return result

    def rollback(
        self, refinement_id: str, *, force: bool = False, trigger: str = "rollback"
    ) -> RefinementResult:
        """Undo a refinement by applying its inverse; refused on later changes unless `force`."""
        check_trigger(trigger)
        with self._mutex, self._locked():
            state, conflicts, target = self._target_locked(refinement_id)
            plan = plan_rollback(state, target, force=force, later_writer=self._later_writer(refinement_id))
            blocked = self._conflict_errors(plan.proposal, conflicts)
            preset = [c or b for c, b in zip(plan.conflicts or [None] * len(blocked), blocked, strict=True)]
            opts = follow_up_options(
                target,
                trigger,
                rollback_of=target.id,
                restores=plan.restores,
                preset_errors=preset,
                scope="project",
            )
            new_state, result = apply_proposal(state, plan.proposal, opts)
            self._commit(new_state, result, len(new_state.tombstones) != len(state.tombstones))
            return result

    def _target_locked(
        self, refinement_id: str
    ) -> tuple[HarnessState, list[ProjectConflict], RefinementResult]:
        """With the store lock held: the state (files repaired), its conflicts and the history
        record a follow-up acts on; `RefinementNotFound` for an unknown id."""
        from harness_store.store import RefinementNotFound

        state, conflicts = self._snapshot(repair=True)
        target = self.get_refinement(refinement_id)
        if target is None:
            raise RefinementNotFound(refinement_id, self.history_path)
        return state, conflicts, target

    def _later_writer(self, target_id: str) -> Callable[[str, str], str | None]:
        def later(kind: str, entry_id: str) -> str | None:
            position = self._history.positions.get(target_id)
            newest: str | None = None
            for line in self._history.lines[(position or 0) + 1 :]:
                if any(e.applied and e.kind == kind and e.id == entry_id for e in line.record.applied_edits):
                    newest = line.record.id
            return newest

        return later

    def record_review(
        self, refinement_id: str, decision: str, *, edit_ids: Iterable[str] | None = None
    ) -> RefinementResult:
        """A review decision on an applied refinement (as `HarnessStore.record_review`)."""
        check_decision(decision)
        with self._mutex, self._locked():
            state, _, target = self._target_locked(refinement_id)
            plan = plan_review(state, target, decision, edit_ids)
            opts = follow_up_options(
                target, "user", review_of=target.id, restores=plan.restores, scope="project"
            )
            new_state, result = apply_review(state, plan, opts)
            self._commit(new_state, result, len(new_state.tombstones) != len(state.tombstones))
            return result

    def reject_proposal(
        self,
        proposal: Proposal | Mapping[str, Any],
        *,
        forever: bool = False,
        reason: str = "rejected in review",
    ) -> list[Tombstone]:
        """Tombstone the content of a proposal rejected before it was applied."""
        if not isinstance(proposal, Proposal):
            proposal = Proposal.model_validate(dict(proposal))
        with self._mutex, self._locked():
            stones, added, changed = reject_tombstones(
                self._read_tombstones(), proposal, forever=forever, reason=reason
            )
            if changed:
                self._write_tombstones(stones)
            return added

    def lift_tombstone(self, tombstone_id: str, *, trigger: str = "user") -> Tombstone | None:
        """Remove a tombstone; returns it, or None if unknown. `tombstones.jsonl` is itself the
        durable record here (no state file to rebuild), so `trigger` is accepted for the API only."""
        with self._mutex, self._locked():
            rest, lifted = lift_tombstone(self._read_tombstones(), tombstone_id)
            if lifted is not None:
                self._write_tombstones(rest)
            return lifted

    def _write_tombstones(self, stones: list[Tombstone]) -> None:
        self._written.append(self.tombstones_path)
        write_text_atomic(self.tombstones_path, "".join(t.model_dump_json() + "\n" for t in stones))

    def resolve_conflict(
        self, kind: str, entry_id: str, choice: int, *, session_id: str | None = None
    ) -> RefinementResult:
        """End a conflict by writing side `choice` of `conflicts()` (a refinement, trigger `user`).

        Raises KeyError when the entry is not in conflict, IndexError for a side that does not exist.
        """
        with self._mutex, self._locked():
            state, conflicts = self._snapshot(repair=True)
            conflict = next((c for c in conflicts if c.kind == kind and c.entry_id == entry_id), None)
            if conflict is None:
                raise KeyError(f"{kind} {entry_id!r} is not in conflict")
            chosen = conflict.candidates[choice]
            reason = f"resolve merge conflict ({conflict.reason})"
            if chosen is None:
                edit = Edit(action="delete", kind=kind, id=entry_id, reason=reason)
                restores: list[HarnessEntry | None] = [None]
                # The conflicted entry is not in the state: a delete must see the file to remove it.
                before = _after_any(conflict)
                if before is not None:
                    state = HarnessState.build(
                        {**state.entries, kind: {**state.entries.get(kind, {}), entry_id: before}},
                        state.tombstones,
                        head=state.head,
                    )
            else:
                edit = edit_from(chosen, "create", reason, entry_id=entry_id)
                restores = [chosen]
            proposal = Proposal(
                summary=f"Resolve merge conflict of {kind} {entry_id}",
                rationale=conflict.reason,
                edits=[edit],
            )
            opts = ApplyOptions(
                refinement_id=new_refinement_id(),
                now=utc_now(),
                scope="project",
                trigger="user",
                session_id=session_id,
                restores=restores,
            )
            new_state, result = apply_proposal(state, proposal, opts)
            self._commit(new_state, result, False)
            return result


def _same_entry(a: HarnessEntry | None, b: HarnessEntry | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.content_key() == b.content_key() and (a.trust, a.version) == (b.trust, b.version)


def _after_any(conflict: ProjectConflict) -> HarnessEntry | None:
    return next((c for c in conflict.candidates if c is not None), None)
