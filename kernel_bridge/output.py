"""A cell's text output: head+tail in memory for the model, and a bounded file on disk.

Memory stays bounded however much a cell prints: the head keeps the first half of the budget, the
tail a rolling window of the last half. The file gets everything up to `max_file_chars` (default
8 M characters): past that it keeps its first half as written and a rolling tail of the second,
with a marker saying how much was left out, so one cell printing 100 MB cannot fill the disk.
`prune_outputs` bounds a session's whole cells directory (oldest files go first).
"""

from __future__ import annotations

import os
import re
from collections import deque
from pathlib import Path
from typing import BinaryIO

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

DEFAULT_MAX_OUTPUT_CHARS = 20_000
DEFAULT_MAX_FILE_CHARS = 8_000_000
DEFAULT_MAX_SESSION_OUTPUT_BYTES = 64 * 1024 * 1024


def strip_ansi(text: str) -> str:
    """Remove terminal colour/cursor codes (IPython tracebacks are coloured)."""
    return _ANSI.sub("", text)


def omitted_marker(count: int, full_output: Path | None = None) -> str:
    """The marker that replaces `count` dropped characters in the model's view; it names the file
    holding the full output when there is one, so the model can page it."""
    where = f"; full output: {full_output}" if full_output is not None else ""
    return f"\n[... {count} characters omitted{where} ...]\n"


def truncate_middle(text: str, max_chars: int) -> str:
    """Head+tail truncation of a string already in memory."""
    if len(text) <= max_chars:
        return text
    head = max_chars // 2
    tail = max_chars - head
    return text[:head] + omitted_marker(len(text) - head - tail) + text[len(text) - tail :]


class OutputCollector:
    """Collects one cell's text; `text()` is what the model sees, `path` holds all of it."""

    def __init__(
        self,
        path: Path,
        max_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        max_file_chars: int = DEFAULT_MAX_FILE_CHARS,
    ) -> None:
        self.path = path
        self._file_head_cap = max_file_chars // 2
        self._file_tail_cap = max_file_chars - self._file_head_cap
        self._file_head_len = 0
        self._file_tail: deque[str] = deque()
        self._file_tail_len = 0
        self.file_omitted = 0  # characters of output left out of the file (past max_file_chars)
        self.max_chars = max_chars
        self._head_cap = max_chars // 2
        self._tail_cap = max_chars - self._head_cap
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total_chars = 0
        self._file: BinaryIO | None = None
        self._file_failed = False

    def _open(self) -> BinaryIO | None:
        """The output file, or None once it could not be written: the cell's output is still kept in
        memory (head + tail) and reported; a full-output file must never be what fails a cell."""
        if self._file is None and not self._file_failed:
            try:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                self._file = os.fdopen(fd, "wb")
            except OSError as exc:
                import logging  # here: this module is on the early session/new path, which logs nothing

                logging.getLogger(__name__).warning(
                    "cannot write the cell output file %s (%s); keeping head and tail only", self.path, exc
                )
                self._file_failed = True
        return self._file

    def add(self, text: str) -> None:
        """Append output text: all of it to the file, head and rolling tail in memory."""
        if not text:
            return
        self._write_file(text)
        self.total_chars += len(text)
        if self._head_len < self._head_cap:
            take = text[: self._head_cap - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            text = text[len(take) :]
            if not text:
                return
        # Only the last `tail_cap` characters can ever be shown; never keep more than that.
        if len(text) >= self._tail_cap:
            self._tail.clear()
            self._tail.append(text[-self._tail_cap :] if self._tail_cap else "")
            self._tail_len = len(self._tail[0])
            return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail and self._tail_len - len(self._tail[0]) >= self._tail_cap:
            self._tail_len -= len(self._tail.popleft())

    def _write_file(self, text: str) -> None:
        # The file's head is written as it comes; past its cap, a rolling tail is kept in memory
        # and written at close (after a marker), so the file never outgrows max_file_chars.
        if self._file_head_len < self._file_head_cap:
            take = text[: self._file_head_cap - self._file_head_len]
            handle = self._open()
            if handle is not None:
                handle.write(take.encode("utf-8", "replace"))
            self._file_head_len += len(take)
            text = text[len(take) :]
            if not text:
                return
        self._file_tail.append(text)
        self._file_tail_len += len(text)
        while self._file_tail and self._file_tail_len > self._file_tail_cap:
            extra = self._file_tail_len - self._file_tail_cap
            first = self._file_tail[0]
            if len(first) <= extra:
                self._file_tail.popleft()
                self._file_tail_len -= len(first)
                self.file_omitted += len(first)
            else:
                self._file_tail[0] = first[extra:]
                self._file_tail_len -= extra
                self.file_omitted += extra

    def text(self) -> str:
        """What the model sees: everything, or head + marker + tail when over `max_chars`."""
        head = "".join(self._head)
        tail = "".join(self._tail)
        if self.total_chars <= self.max_chars:
            return head + tail  # nothing was dropped
        # The tail window may hold a few characters more than its cap; show exactly the cap.
        tail = tail[len(tail) - self._tail_cap :]
        return head + omitted_marker(self.total_chars - len(head) - len(tail), self.path) + tail

    def close(self) -> None:
        # A cell without output gets no file: creating one costs ~1 ms on this machine's disk,
        # a third of a trivial cell's round trip.
        """Close the output file (if any output was written), writing its kept tail first."""
        if self._file is not None:
            if self._file_tail:
                if self.file_omitted:
                    self._file.write(
                        f"\n[... {self.file_omitted} characters omitted: this file keeps the first and "
                        f"last {self._file_tail_cap} characters of the cell's output ...]\n".encode()
                    )
                self._file.write("".join(self._file_tail).encode("utf-8", "replace"))
                self._file_tail.clear()
            self._file.close()


def prune_outputs(directory: Path, max_bytes: int, keep: Path | None = None) -> int:
    """Delete the oldest `cell-*.txt` files in `directory` until they total at most `max_bytes`
    (never `keep`, the file being written); returns the total left."""
    files: list[tuple[str, Path, int]] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.startswith("cell-") and entry.is_file(follow_symlinks=False):
                    files.append((entry.name, Path(entry.path), entry.stat(follow_symlinks=False).st_size))
    except OSError:
        return 0
    files.sort()  # names start with a timestamp and a sequence number: oldest first
    total = sum(size for _, _, size in files)
    for _, path, size in files:
        if total <= max_bytes:
            break
        if keep is not None and path == keep:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
    return total
