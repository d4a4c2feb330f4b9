"""`RepositoryBackend`: the harness of one repository, committed with its code (the `project` scope).

Layout under `<repo>/.continual-acp/harness/`:

* `entries/<kind>/<id>.md` — one reviewable text file per entry (project_files.py), so the
  `git diff` of a refinement shows what it changed and a pull request can review it;
* `history.jsonl` — append-only, one record per refinement (project_history.py); every
  record also names, per entry it wrote, the record that wrote that entry before (`parents`);
* `tombstones.jsonl` — rejected content, one per line (itself the durable record of rejections
  and lifts: there is no state file to rebuild);
* `.gitattributes` (`merge=union` for the two logs, so concurrent appends merge without conflict
  markers) and `.gitignore` (the lock and temp files).

The entry files are the current state; the history is the audit trail and what rollback, the as-of
view and conflict detection read. Writes go history first, then files: if a writer dies between
the two, every reader sees the last record's entries (its files still equal its `before`
snapshots) and the next locked write rewrites the files. Files that moved on since (a merge, a
hand edit) or hold conflict markers are never overwritten this way; deleting an entry's file by
hand right after its create does count as "behind" (delete through the store instead).

**When refinements meet in git.** After a merge or rebase the backend loads the merged files. An
entry changed on both sides is a *conflict*, never silently picked: either its file holds git
conflict markers, or two history records wrote it from the same parent record (a fork; the text
merge may have been clean). A conflicted entry is left out of the state (it cannot reach the
prompt), refuses further edits (`Snapshot.blocked`), and is listed by `conflicts()` with each
side's version for `/review`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_store import write_listeners
from harness_store.backend import Backend, Snapshot
from harness_store.core import _SOURCE_BY_TRIGGER
from harness_store.dir_watch import DirWatch
from harness_store.errors import HarnessStoreError
from harness_store.lock import DEFAULT_TIMEOUT, StoreLock
from harness_store.models import (
    KINDS,
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
    id_from_file_name,
    parse_entry,
    render_entry,
    split_conflict,
    write_text_atomic,
)
from harness_store.project_history import ProjectHistory, after_of, entry_key
from harness_store.project_rules import rule_errors
from harness_store.safe_read import ENTRY_MAX_BYTES, HISTORY_MAX_BYTES, Refused, read_text, warn_once
from harness_store.tombstones import add_tombstone

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


class RepositoryBackend(Backend):
    """The project scope's files for the repository at `repo`."""

    def __init__(self, repo: Path | str, *, lock_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.repo = Path(repo)
        self.root = project_root(self.repo)
        self.entries_dir = self.root / ENTRIES_DIR
        self.history_path = self.root / HISTORY_FILE
        self.tombstones_path = self.root / TOMBSTONES_FILE
        self.lock_path = self.root / LOCK_FILE
        self.lock_timeout = lock_timeout
        # path (a str: Path objects cost more than the stat) -> ((inode, mtime_ns, size), parsed entry or
        # the file's text when it does not parse). Re-parsing happens only for files that changed.
        # None: not a regular file (a FIFO, a device...), skipped with one warning (safe_read.py).
        self._files: dict[str, tuple[tuple[int, int, int], HarnessEntry | str | None]] = {}
        self._history = ProjectHistory(self.history_path)
        # The last snapshot read with nothing to repair and no conflict, and what it was read from
        # (history version, tombstones file signature): while no file changed, `read()` hands out
        # this same object, so the prompt's view of it (and its word index) is reused.
        self._clean: tuple[tuple[object, ...], HarnessState] | None = None
        # Which lets that read skip the stat of every entry file (dir_watch.py: inotify, where trusted).
        self._watch = DirWatch([self.root, self.entries_dir, *(self.entries_dir / kind for kind in KINDS)])
        # An entry file that is a symlink: a write to its target raises no event in these directories,
        # so while the last scan saw one, every read stats each file instead of trusting the watch.
        self._links = False
        self._written: list[Path] = []  # the files the current locked write touched (write_listeners)

    @property
    def default_scope(self) -> str:
        """Always `project`."""
        return "project"

    # -- reading the files ------------------------------------------------------------------------

    def _scan(self) -> tuple[dict[str, dict[str, HarnessEntry]], list[ProjectConflict], bool]:
        """Every entry file parsed (or its conflict), and whether any file changed since the last scan."""
        entries = empty_entries()
        broken: list[ProjectConflict] = []
        seen: set[str] = set()
        changed = links = False
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
                links = links or item.is_symlink()  # from the listing's file type: no extra call
                parsed, fresh = self._read(item)
                changed = changed or fresh
                if isinstance(parsed, HarnessEntry):
                    entries[kind][parsed.id] = parsed
                elif parsed is not None:
                    broken.append(self._file_conflict(kind, Path(item.path), parsed))
        for stale in set(self._files) - seen:
            del self._files[stale]
            changed = True
        self._links = links
        return entries, broken, changed

    def _read(self, item: os.DirEntry[str]) -> tuple[HarnessEntry | str | None, bool]:
        """The file's entry (or its text when it does not parse; None when it is not a regular file),
        and whether it was read afresh."""
        path = item.path
        try:
            stat = item.stat()
        except OSError:
            return "", True
        sig = (stat.st_ino, stat.st_mtime_ns, stat.st_size)  # the inode: a save by rename in one tick
        cached = self._files.get(path)
        if cached is not None and cached[0] == sig:
            return cached[1], False
        try:
            # The repository's file: regular, non-blocking, capped (harness_store/safe_read.py); a
            # linked entry is followed (supported), what it reaches is checked on the descriptor.
            text = read_text(path, limit=ENTRY_MAX_BYTES, follow=True)
        except Refused as exc:  # not an entry at all: skipped, not listed as a broken one
            warn_once(path, exc.strerror, log)
            self._files[path] = (sig, None)
            return None, True
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
        return value, True

    def _file_conflict(self, kind: str, path: Path, text: str) -> ProjectConflict:
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
        if self._clean is not None and not self._links and not self._watch.changed():  # nothing touched
            self._history.refresh()
            if self._clean[0] == (self._history.version, _signature(self.tombstones_path)):
                return self._clean[1], []
        self._watch.arm()  # before the scan: a write during it makes the next read scan again
        entries, conflicts, changed = self._scan()
        self._history.refresh()
        source = (self._history.version, _signature(self.tombstones_path))
        if not changed and not conflicts and self._clean is not None and self._clean[0] == source:
            return self._clean[1], []
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
        state = HarnessState.build(entries, self._read_tombstones(), head=head)
        self._clean = (source, state) if not missing and not conflicts else None
        return state, conflicts

    def check_scope(self, scope: str) -> None:
        if scope != "project":
            raise ValueError(f"a project store only accepts scope 'project', not {scope!r}")

    @property
    def follow_up_scope(self) -> str | None:
        return "project"

    def read(self) -> HarnessState:
        """The entries (conflicted ones left out), tombstones and head; never raises on a bad file."""
        try:
            return self._snapshot()[0]
        except HarnessStoreError as exc:
            log.warning("%s", exc)
            return HarnessState()

    def conflicts(self) -> list[ProjectConflict]:
        """Entries changed on both sides of a git merge or rebase, sorted."""
        return sorted(self._snapshot()[1], key=lambda c: (c.kind, c.entry_id))

    def history_count(self) -> int:
        self._history.refresh()
        return len(self._history.lines)

    def history_records(self, start: int = 0, stop: int | None = None) -> Iterator[RefinementResult]:
        self._history.refresh()
        return iter([line.record for line in self._history.lines[start:stop]])

    def history_position(self, refinement_id: str) -> int | None:
        self._history.refresh()
        return self._history.positions.get(refinement_id)

    def history_get(self, refinement_id: str) -> RefinementResult | None:
        position = self.history_position(refinement_id)
        return self._history.lines[position].record if position is not None else None

    def view_path(self, kind: str, entry_id: str, *, scope: str | None = None) -> Path:
        """The entry's own file: in a project store the reviewable view *is* the stored text."""
        return self.entries_dir / kind / file_name(entry_id)

    def _read_tombstones(self) -> list[Tombstone]:
        stones: list[Tombstone] = []
        try:
            text = read_text(self.tombstones_path, limit=HISTORY_MAX_BYTES)
        except FileNotFoundError:
            return stones
        except Refused as exc:
            warn_once(self.tombstones_path, exc.strerror, log)
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

    # -- writing ----------------------------------------------------------------------------------

    def locked(self) -> contextlib.AbstractContextManager[object]:
        return self._holding()

    @contextlib.contextmanager
    def _holding(self) -> Iterator[None]:
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

    def conflicted_snapshot_locked(self) -> tuple[HarnessState, list[ProjectConflict]]:
        """The state a write starts from (files repaired) and the entries in conflict."""
        return self._snapshot(repair=True)

    def snapshot_locked(self) -> Snapshot:
        state, conflicts = self._snapshot(repair=True)
        return Snapshot(
            state, {(c.kind, c.entry_id): MSG_CONFLICTED.format(reason=c.reason) for c in conflicts}
        )

    def rule_errors(self, proposal: Proposal, *, source: str | None, trigger: str) -> list[str | None]:
        """Per edit, why it breaks the project rule (project_rules.py: a refinement-written edit
        must be a fact about this repository), or None. `source` None: the trigger's default."""
        effective = source or _SOURCE_BY_TRIGGER.get(trigger, "agent")
        return rule_errors(proposal.edits, self.repo, effective)

    def tombstones_locked(self) -> list[Tombstone]:
        return self._read_tombstones()

    def save_tombstones_locked(
        self,
        tombstones: list[Tombstone],
        *,
        summary: str,
        tombstoned: Sequence[Tombstone] = (),
        lifted: Sequence[Tombstone] = (),
        trigger: str = "user",
    ) -> None:
        """`tombstones.jsonl` is itself the durable record here (no state file to rebuild)."""
        self._write_tombstones(tombstones)

    def _write_tombstones(self, stones: Sequence[Tombstone]) -> None:
        self._written.append(self.tombstones_path)
        write_text_atomic(self.tombstones_path, "".join(t.model_dump_json() + "\n" for t in stones))

    def commit_locked(self, before: HarnessState, after: HarnessState, result: RefinementResult) -> None:
        self._commit(after, result, len(after.tombstones) != len(before.tombstones))

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
                    self._files[str(path)] = ((stat.st_ino, stat.st_mtime_ns, stat.st_size), edit.after)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
            if tombstones_changed:
                self._write_tombstones(state.tombstones)
        except OSError as exc:
            raise HarnessStoreError(f"cannot write the project harness {self.root}: {exc.strerror}") from exc


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def _same_entry(a: HarnessEntry | None, b: HarnessEntry | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.content_key() == b.content_key() and (a.trust, a.version) == (b.trust, b.version)
