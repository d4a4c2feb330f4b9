"""A change a cell made to `.continual-acp/`, held for review: per file its content before and after.

The files were restored to `before` when the change was found; approving the review writes `after`
back (only where a file still holds `before`, or, for an append-only log, appends what the cell
appended), rejecting it discards it. The record is plain JSON (bytes that are not UTF-8 as base64),
kept with the pending review.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import difflib
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MAX_HELD_BYTES", "HeldChange", "HeldFile"]

# A file bigger than this is not kept byte for byte (a cell writing a huge file is held as "too
# large to keep": it is still restored, but approving cannot bring it back).
MAX_HELD_BYTES = 1 << 20
DIFF_LINES = 400


def _encode(data: bytes | None) -> dict[str, str] | None:
    if data is None:
        return None
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _decode(raw: Any) -> bytes | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError("a held file's content must be an object or null")
    if "text" in raw:
        return str(raw["text"]).encode("utf-8")
    try:
        return base64.b64decode(str(raw["base64"]), validate=True)
    except (KeyError, binascii.Error) as exc:
        raise ValueError(f"a held file's content is not valid base64: {exc}") from None


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class HeldFile:
    """One file: `path` absolute; `before`/`after` None when it did not exist (or was too large:
    then `too_large` says so and approving skips it)."""

    path: str
    before: bytes | None
    after: bytes | None
    too_large: bool = False

    @property
    def action(self) -> str:
        if self.before is None and not self.too_large:
            return "created"
        if self.after is None and not self.too_large:
            return "deleted"
        return "changed"

    def diff(self) -> str:
        """A unified diff (bounded), for the review card's text and the panel."""
        if self.too_large:
            return f"{self.path}: too large to keep (over {MAX_HELD_BYTES} bytes)"
        old = (_text(self.before) or "").splitlines(keepends=True)
        new = (_text(self.after) or "").splitlines(keepends=True)
        lines = list(difflib.unified_diff(old, new, f"a{self.path}", f"b{self.path}"))
        if len(lines) > DIFF_LINES:
            lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more diff lines\n"]
        return "".join(lines)

    def stat(self) -> tuple[int, int]:
        """(lines added, lines removed)."""
        added = removed = 0
        old = (_text(self.before) or "").splitlines()
        new = (_text(self.after) or "").splitlines()
        for line in difflib.ndiff(old, new):
            if line.startswith("+ "):
                added += 1
            elif line.startswith("- "):
                removed += 1
        return added, removed

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "before": _encode(self.before),
            "after": _encode(self.after),
            "tooLarge": self.too_large,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> HeldFile:
        return cls(
            str(raw["path"]), _decode(raw.get("before")), _decode(raw.get("after")), bool(raw.get("tooLarge"))
        )


@dataclass(frozen=True)
class HeldChange:
    """What one cell (or the time between two cells of a turn) changed under `.continual-acp/`."""

    files: tuple[HeldFile, ...]
    cell_id: str
    code: str  # the cell's source, bounded: the evidence
    when: str = "while the cell ran"
    restore_errors: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        names = ", ".join(f"{_short(f.path)} ({f.action})" for f in self.files[:5])
        more = f" and {len(self.files) - 5} more" if len(self.files) > 5 else ""
        who = "a cell" if self.when == "while the cell ran" else f"a change made {self.when}"
        return f"Held for review: {who} wrote .continual-acp/: {names}{more}"

    def to_json(self) -> dict[str, Any]:
        return {
            "files": [f.to_json() for f in self.files],
            "cellId": self.cell_id,
            "code": self.code,
            "when": self.when,
            "restoreErrors": list(self.restore_errors),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> HeldChange:
        files = raw.get("files")
        if not isinstance(files, list):
            raise ValueError("a held change needs a list of files")
        return cls(
            tuple(HeldFile.from_json(f) for f in files),
            str(raw.get("cellId", "")),
            str(raw.get("code", "")),
            str(raw.get("when", "while the cell ran")),
            tuple(str(e) for e in raw.get("restoreErrors", ())),
        )

    def write_back(self) -> list[str]:
        """Approve: put each file's `after` in place; the reasons for files left as they are.

        A server write like the store's: under the store lock and reported to the guards
        (harness_store.write_listeners), so no session's guard takes it for its cell's."""
        from harness_store import write_listeners  # after the session/new answer, like the store

        problems: list[str] = []
        for held in self.files:
            with _store_lock(Path(held.path)):
                problem = _write_back(held)
                write_listeners.notify(Path(held.path).parent, [Path(held.path)])
            if problem:
                problems.append(problem)
        return problems


@contextlib.contextmanager
def _store_lock(path: Path) -> Iterator[None]:
    """The project store's lock of the `.continual-acp/` holding `path`, when it has a harness."""
    control = next((p for p in path.parents if p.name == ".continual-acp"), None)
    lock = control / "harness" / ".lock" if control is not None else None
    if lock is None or not lock.parent.is_dir():
        yield
        return
    from harness_store.lock import StoreLock

    with StoreLock(lock):
        yield


def _short(path: str) -> str:
    marker = f"{os.sep}.continual-acp{os.sep}"
    return path[path.find(marker) + 1 :] if marker in path else path


def _read(path: Path) -> bytes | None:
    """The file as it is now (None: absent); a FIFO or device swapped in is not read (a refusal is
    an OSError: the write-back reports it)."""
    from harness_store.safe_read import HISTORY_MAX_BYTES, read_bytes

    try:
        return read_bytes(path, limit=HISTORY_MAX_BYTES)
    except FileNotFoundError:
        return None


def _write_back(held: HeldFile) -> str | None:
    if held.too_large:
        return f"{held.path}: too large to keep, not written"
    path = Path(held.path)
    try:
        current = _read(path)
        if current == held.after:
            return None
        if current != held.before:
            before, after = held.before, held.after
            # An append-only log (the history) that grew meanwhile: append what the cell appended.
            if before is not None and after is not None and after.startswith(before) and current:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                with os.fdopen(fd, "ab") as fh:
                    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                        return f"{held.path}: not a regular file now, not written"
                    fh.write(after[len(before) :])
                return None
            return f"{held.path}: changed since the cell ran, not overwritten"
        if held.after is None:
            path.unlink(missing_ok=True)
        else:
            write_bytes_atomic(path, held.after)
    except OSError as exc:
        return f"{held.path}: {exc.strerror or exc}"
    return None


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` through the one atomic write; mode 0644: a workspace file the
    user's tools read, not private state."""
    from host_base.private_files import write_atomic  # off the startup path

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data, mode=0o644)


def diff_stat(files: Sequence[HeldFile]) -> str:
    """`path | +a -r` lines, one per file."""
    return "\n".join(f"{_short(f.path)} | +{a} -{r}" for f in files for a, r in [f.stat()])
