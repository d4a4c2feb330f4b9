"""A project store's `history.jsonl`: append-only records, each naming its entries' parent records.

One JSON object per line (sorted keys), a `RefinementResult` plus `parents`: for every entry the
record wrote, the id of the record that wrote that entry before it (None for the first write).
Parents are what make a git merge of two people's refinements detectable even when the text of
the entry files merged cleanly: two records that wrote one entry from the same parent are a fork.

Reading is incremental (only appended bytes are parsed; a replaced file — git checkout, merge —
is re-read from the start). Malformed lines, including conflict markers left by a merge without
the union driver, are skipped with a warning; a record that appears twice (identical appends
merged) counts once.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from harness_store.models import HarnessEntry, RefinementResult
from harness_store.safe_read import HISTORY_MAX_BYTES, Refused, read_bytes, warn_once

log = logging.getLogger("harness_store")


def entry_key(kind: str, entry_id: str) -> str:
    """`<kind>/<id>`: how `parents` names an entry."""
    return f"{kind}/{entry_id}"


@dataclass
class HistoryLine:
    """One parsed history line."""

    record: RefinementResult
    parents: dict[str, str | None]


def after_of(line: HistoryLine, kind: str, entry_id: str) -> HarnessEntry | None:
    """What one record left the entry as (its last applied edit of it; None for a delete)."""
    found: HarnessEntry | None = None
    for edit in line.record.applied_edits:
        if edit.applied and edit.kind == kind and edit.id == entry_id:
            found = edit.after
    return found


class ProjectHistory:
    """The parsed lines of one `history.jsonl`, and what is derived from them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[HistoryLine] = []
        self.positions: dict[str, int] = {}
        self._sig: tuple[int, int] | None = None
        self._offset = 0
        self._generation = 0  # bumped whenever the lines are re-read from scratch
        self._derived_for: tuple[int, int] | None = None
        self._forks: dict[str, tuple[HistoryLine, HistoryLine]] = {}
        self._writers: dict[str, str] = {}

    def _reset(self) -> None:
        self._offset, self.lines, self.positions = 0, [], {}
        self._generation += 1

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever the parsed lines do (a line appended, the file re-read from scratch)."""
        return self._generation, len(self.lines)

    def refresh(self) -> None:
        """Parse what was appended since the last call (everything, if the file was replaced)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            if self._sig is not None or self.lines:  # already empty: nothing changed
                self._sig = None
                self._reset()
            return
        sig = (stat.st_ino, stat.st_size)
        if sig == self._sig:
            return
        if self._sig is None or sig[0] != self._sig[0] or sig[1] < self._offset:
            self._reset()
        try:
            # The repository's file: regular, non-blocking, capped (safe_read.py).
            data = read_bytes(self.path, limit=HISTORY_MAX_BYTES, offset=self._offset)
        except Refused as exc:
            warn_once(self.path, exc.strerror, log)
            return
        end = data.rfind(b"\n") + 1  # a torn last line is read once it is complete
        for raw in data[:end].split(b"\n"):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
                record = RefinementResult.model_validate(obj)
            except ValueError:
                # Also what a conflict marker line looks like when the union merge driver was absent.
                log.warning("project harness history %s: skipped a malformed line", self.path)
                continue
            parents = obj.get("parents") if isinstance(obj.get("parents"), dict) else {}
            if record.id in self.positions:
                continue  # the same record twice (a union merge of identical appends)
            self.positions[record.id] = len(self.lines)
            self.lines.append(HistoryLine(record, parents))
        self._offset += end
        self._sig = (sig[0], self._offset)

    def append(self, result: RefinementResult, parents: dict[str, str | None]) -> None:
        """Append one record (fsync'd; new files 0644: the history is committed). Raises OSError."""
        line = result.model_dump(mode="json", exclude_none=True)
        line["parents"] = parents
        data = (json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        # The repository's file: O_NONBLOCK so a FIFO there fails (ENXIO) instead of waiting for a
        # reader, and anything but a regular file is refused before a byte is written.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o644)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file", str(self.path))
        with os.fdopen(fd, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def _derive(self) -> None:
        key = (self._generation, len(self.lines))
        if self._derived_for != key:
            self._forks, self._writers = self._compute_forks(), self._compute_writers()
            self._derived_for = key

    def last_writers(self) -> dict[str, str]:
        """`<kind>/<id>` -> the last record (in file order) that wrote it."""
        self._derive()
        return self._writers

    def forks(self) -> dict[str, tuple[HistoryLine, HistoryLine]]:
        """Entries two records wrote from the same parent record, with no later write resolving it."""
        self._derive()
        return self._forks

    def _compute_writers(self) -> dict[str, str]:
        writers: dict[str, str] = {}
        for line in self.lines:
            for edit in line.record.applied_edits:
                if edit.applied and edit.id is not None:
                    writers[entry_key(edit.kind, edit.id)] = line.record.id
        return writers

    def _compute_forks(self) -> dict[str, tuple[HistoryLine, HistoryLine]]:
        by_parent: dict[tuple[str, str | None], HistoryLine] = {}
        forks: dict[str, tuple[HistoryLine, HistoryLine]] = {}
        for line in self.lines:
            for edit in line.record.applied_edits:
                if not edit.applied or edit.id is None:
                    continue
                key = entry_key(edit.kind, edit.id)
                if key not in line.parents:
                    continue  # written before parents were recorded
                forks.pop(key, None)  # a write after both sides: the conflict was resolved
                parent = (key, line.parents[key])
                first = by_parent.get(parent)
                if first is not None and first.record.id != line.record.id:
                    forks[key] = (first, line)
                by_parent[parent] = line
        return forks
