"""`refinements.jsonl`: the append-only history of one store, with an incremental id -> offset index.

Lookups must not re-parse 100,000 records per call. The index maps each record id to the byte
offset of its line and is extended by reading only the bytes appended since the last look (another
process may have appended); it is rebuilt when the file was replaced or shrank. Apply never needs
the index: it only asks for the id of the last record, read from the end of the file.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from harness_store.errors import HarnessStoreError
from harness_store.models import RefinementResult

log = logging.getLogger("harness_store")

# Records are written by us with `id` first, so the id is found without parsing the line.
_ID_PREFIX = re.compile(rb'^\{"id":"([^"\\]+)"')
_TAIL_CHUNK = 65536
_BISECT_SPAN = 8192
# Our refinement ids: "r-YYYYMMDD-HHMMSSmmm-<hex>"; the part before the suffix sorts by time.
_OUR_ID = re.compile(r"^(r-\d{8}-\d{9})-[0-9a-f]+$")


def _time_key(record_id: str) -> str | None:
    match = _OUR_ID.match(record_id)
    return match.group(1) if match else None


def _line_id(line: bytes) -> str | None:
    match = _ID_PREFIX.match(line)
    if match:
        return match.group(1).decode("utf-8", "replace")
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return str(value["id"])
    return None


def _parse(line: bytes, where: str) -> RefinementResult | None:
    try:
        return RefinementResult.model_validate_json(line)
    except ValidationError as exc:
        log.warning("skipping malformed history line %s: %s", where, exc.errors()[0].get("msg", exc))
        return None


class HistoryLog:
    """One store's `refinements.jsonl`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offsets: dict[str, int] = {}
        self._order: list[str] = []
        self._scanned = 0
        self._identity: tuple[int, int] | None = None
        self._warned: set[int] = set()

    # -- writing -------------------------------------------------------------------------------

    def append(self, record: RefinementResult) -> None:
        """Append one record and fsync (call only while holding the store lock)."""
        line = record.model_dump_json(exclude_none=False).encode("utf-8") + b"\n"
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            raise HarnessStoreError(f"cannot open the harness history {self.path}: {exc.strerror}") from exc
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                # A writer was killed mid-line: end the torn line so it is skipped as malformed
                # instead of swallowing this record.
                os.write(fd, b"\n")
                size += 1
            os.write(fd, line)
            os.fsync(fd)
        except OSError as exc:
            raise HarnessStoreError(
                f"cannot append to the harness history {self.path}: {exc.strerror}"
            ) from exc
        finally:
            os.close(fd)
        if self._scanned == size and self._identity is not None:
            self._offsets[record.id] = size
            self._order.append(record.id)
            self._scanned = size + len(line)

    # -- reading -------------------------------------------------------------------------------

    def last_id(self) -> str | None:
        """Id of the last complete record line, read from the end of the file (O(1) in history length)."""
        try:
            with open(self.path, "rb") as handle:
                pos = handle.seek(0, os.SEEK_END)
                buf = b""
                while pos > 0:
                    step = min(_TAIL_CHUNK, pos)
                    pos -= step
                    handle.seek(pos)
                    buf = handle.read(step) + buf
                    last_newline = buf.rfind(b"\n")
                    if last_newline < 0:
                        continue  # only a torn (unterminated) line so far
                    lines = buf[:last_newline].split(b"\n")
                    # When we have not reached the start of the file, the first piece may be partial.
                    for line in reversed(lines if pos == 0 else lines[1:]):
                        if line.strip():
                            found = _line_id(line)
                            if found is not None:
                                return found
                            pos = -1  # malformed last line: use the index below
                            break
                    if pos < 0:
                        break
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("harness history %s is unreadable: %s", self.path, exc)
            return None
        if pos == 0:
            return None  # no complete record at all
        self.refresh()
        return self._order[-1] if self._order else None

    def refresh(self) -> None:
        """Extend the index with whatever was appended since the last look."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._reset(None)
            return
        except OSError as exc:
            log.warning("harness history %s is unreadable: %s", self.path, exc)
            return
        identity = (stat.st_dev, stat.st_ino)
        if identity != self._identity or stat.st_size < self._scanned:
            self._reset(identity)
        if stat.st_size == self._scanned:
            return
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._scanned)
                chunk = handle.read(stat.st_size - self._scanned)
        except OSError as exc:
            raise self._unreadable(exc) from exc
        pos = 0
        base = self._scanned
        while True:
            newline = chunk.find(b"\n", pos)
            if newline < 0:
                break  # an unfinished last line is not a record yet
            line = chunk[pos:newline]
            offset = base + pos
            pos = newline + 1
            if not line.strip():
                continue
            record_id = _line_id(line)
            if record_id is None:
                if offset not in self._warned:
                    self._warned.add(offset)
                    log.warning("skipping malformed history line at byte %d of %s", offset, self.path)
                continue
            if record_id not in self._offsets:
                self._order.append(record_id)
            self._offsets[record_id] = offset
        self._scanned = base + pos

    def _unreadable(self, exc: OSError) -> HarnessStoreError:
        return HarnessStoreError(
            f"cannot read the harness history {self.path}: {exc.strerror or exc}; "
            "check that it is a file this user can read"
        )

    def _reset(self, identity: tuple[int, int] | None) -> None:
        self._offsets = {}
        self._order = []
        self._scanned = 0
        self._identity = identity

    def _read_at(self, offset: int) -> bytes:
        with open(self.path, "rb") as handle:
            handle.seek(offset)
            line = handle.readline()
        return line.rstrip(b"\n")

    def get(self, record_id: str) -> RefinementResult | None:
        """The record with this id, or None (malformed or unknown)."""
        offset = self._offsets.get(record_id)
        if offset is None and self._scanned == 0:
            # Cold (e.g. a CLI process): binary search instead of indexing 100k lines first.
            offset = self._bisect(record_id)
        if offset is None:
            self.refresh()
            offset = self._offsets.get(record_id)
        if offset is None:
            return None
        try:
            line = self._read_at(offset)
        except OSError as exc:
            log.warning("harness history %s is unreadable: %s", self.path, exc)
            return None
        record = _parse(line, f"at byte {offset} of {self.path}")
        return record if record is not None and record.id == record_id else None

    def _bisect(self, record_id: str) -> int | None:
        """Offset of the record's line, by binary search on the time part of our ids.

        Records are appended under the store lock with ids made inside it, so their time parts
        ascend in file order. Where that does not hold (a clock stepped back, ids of another form)
        this returns None and the caller falls back to the full index, so it is never wrong.
        """
        key = _time_key(record_id)
        if key is None:
            return None
        try:
            with open(self.path, "rb") as handle:
                lo, hi = 0, handle.seek(0, os.SEEK_END)
                # Invariant: lo is a line start whose key is < key (or 0); the wanted line starts before hi's next line.
                while hi - lo > _BISECT_SPAN:
                    mid = (lo + hi) // 2
                    handle.seek(mid)
                    handle.readline()  # skip to the next line start
                    start = handle.tell()
                    line = handle.readline()
                    found = _line_id(line) if line.endswith(b"\n") else None
                    mid_key = _time_key(found) if found else None
                    if mid_key is None:
                        return None
                    if mid_key < key:
                        lo = start
                    else:
                        hi = mid
                handle.seek(lo)
                while True:
                    start = handle.tell()
                    line = handle.readline()
                    if not line.endswith(b"\n"):
                        return None
                    found = _line_id(line)
                    if found == record_id:
                        return start
                    found_key = _time_key(found) if found else None
                    if found_key is not None and found_key > key:
                        return None
        except OSError:
            return None

    def ids(self) -> list[str]:
        """Every indexed record id in file order (oldest first)."""
        self.refresh()
        return list(self._order)

    def position(self, record_id: str) -> int | None:
        """Index of the record in file order, or None."""
        self.refresh()
        if record_id not in self._offsets:
            return None
        return self._order.index(record_id)

    def records(self, start: int = 0, stop: int | None = None) -> Iterator[RefinementResult]:
        """Parsed records by file position (malformed ones skipped with a warning)."""
        self.refresh()
        wanted = self._order[start:stop]
        if not wanted:
            return
        try:
            handle = open(self.path, "rb")  # closed below; a generator holds it
        except OSError as exc:
            raise self._unreadable(exc) from exc
        with handle:
            for record_id in wanted:
                offset = self._offsets[record_id]
                handle.seek(offset)
                line = handle.readline().rstrip(b"\n")
                record = _parse(line, f"at byte {offset} of {self.path}")
                if record is not None:
                    yield record

    def __len__(self) -> int:
        self.refresh()
        return len(self._order)
