"""The control-plane guard of one session on an unconfined backend: a cell cannot rewrite its referee.

`.continual-acp/` (gates, the project harness) changes only through the server's code paths. On
the local, gateway and provisioner backends nothing stops a cell from writing it, so the guard
compares the tree before and after each cell: one `scandir` walk per check (size, mtime, inode),
content read only for the files whose stat moved. What a cell changed is restored to what it was
before, and returned as a `HeldChange` for the caller to hold as a pending review.

* The baseline is accepted at the start of each prompt (`refresh`): changes made between prompts
  (a person editing, `git pull`) are not the agent's and load as today.
* Within a prompt every change is the agent's, also one found before a cell (made between two cells,
  by a process an earlier cell left running) or when the prompt ends.
* The server's own writes (the project store, from this process) are reported by the store
  (harness_store.write_listeners) under its lock; the guard checks under that same lock, so it never
  sees a store write half done and never takes one for a cell's.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_core.control_plane.held import MAX_HELD_BYTES, HeldChange, HeldFile, write_bytes_atomic
from agent_core.control_plane.scan import Scan, file_stat, moved, scan

__all__ = ["CONTROL_DIR", "MODEL_NOTE", "ControlPlaneGuard", "LockBusy"]

log = logging.getLogger(__name__)

CONTROL_DIR = ".continual-acp"
MODEL_NOTE = (
    "[server] writes to .continual-acp/ go through harness.*; your edit is held for review "
    "(the files were restored): {paths}"
)
MAX_CODE = 4_000
MAX_HELD_FILES = 200  # files kept with their content in one held change (the rest by name)

try:
    import fcntl
except ImportError:  # Windows: the in-process lock only
    fcntl = None  # type: ignore[assignment]


class LockBusy(Exception):
    """The store lock is held (a write in progress): check again off the event loop."""


@dataclass(frozen=True, slots=True)
class _Big:
    """A baseline file too large to keep: its size and digest (an append can still be cut back)."""

    size: int
    digest: bytes


_Content = bytes | _Big | None  # None: the file did not exist


class ControlPlaneGuard:
    """Watches the `.continual-acp/` directories of one session (its cwd's and its repository's)."""

    def __init__(self, roots: Sequence[Path], *, lock_path: Path | None = None) -> None:
        seen: list[Path] = []
        for root in roots:
            path = Path(os.path.realpath(root))  # the store reports resolved paths
            if path not in seen:
                seen.append(path)
        self.roots = tuple(seen)
        self.lock_path = lock_path
        self._mutex = threading.Lock()
        self._scans: dict[Path, Scan] = {}
        self._content: dict[str, _Content] = {}
        self._listening: list[Path] = []
        # Imported here: a session's turn module loads this one before the session/new answer,
        # and harness_store (with pydantic) must load only after it.
        from harness_store import write_listeners

        for root in self.roots:
            write_listeners.register(root, self._server_wrote)
            self._listening.append(root)

    def close(self) -> None:
        from harness_store import write_listeners

        for root in self._listening:
            write_listeners.unregister(root, self._server_wrote)
        self._listening.clear()

    # ------------------------------------------------------------ baseline

    def refresh(self) -> None:
        """Accept the tree as it is now (a prompt starts): read what moved since the last look."""
        with self._locked():
            for root in self.roots:
                now = scan(root)
                old = self._scans.get(root)
                paths = list(now.files) if old is None else moved(old, now)
                for rel in paths:
                    self._content[str(root / rel)] = _read(root / rel)
                self._scans[root] = now

    def ensure_baseline(self) -> None:
        """Take the baseline now if there is none yet (the guard appeared with the first kernel)."""
        if not self._scans:
            self.refresh()

    def _server_wrote(self, paths: Sequence[Path]) -> None:
        """The store wrote `paths` (called under its lock): they are the new baseline."""
        with self._mutex:
            for path in paths:
                absolute = Path(os.path.realpath(Path(path).parent)) / Path(path).name
                for root in self.roots:
                    if root in absolute.parents and root in self._scans:
                        self._rebase(root, absolute)

    def _rebase(self, root: Path, absolute: Path) -> None:
        rel = str(absolute.relative_to(root))
        files = dict(self._scans[root].files)
        dirs = set(self._scans[root].dirs)
        try:
            info = absolute.lstat()
        except OSError:
            files.pop(rel, None)
            self._content.pop(str(absolute), None)
        else:
            files[rel] = file_stat(info)
            self._content[str(absolute)] = _read(absolute)
            parent = absolute.parent
            while parent != root and root in parent.parents:
                dirs.add(str(parent.relative_to(root)))
                parent = parent.parent
        self._scans[root] = Scan(files, frozenset(dirs))

    # ------------------------------------------------------------ the check

    def check(
        self, cell_id: str, code: str, *, when: str = "while the cell ran", wait: bool = True
    ) -> HeldChange | None:
        """Compare with the baseline; restore and return what changed (None: nothing did).

        Before the first `refresh` the first check only takes the baseline. `wait=False` raises
        `LockBusy` instead of waiting for the store lock (the event loop must not block on it)."""
        with self._locked(wait=wait):
            if not self._scans:
                for root in self.roots:
                    self._scans[root] = now = scan(root)
                    for rel in now.files:
                        self._content[str(root / rel)] = _read(root / rel)
                return None
            held: list[HeldFile] = []
            errors: list[str] = []
            for root in self.roots:
                old = self._scans.get(root) or Scan({}, frozenset())
                now = scan(root)
                paths = moved(old, now)
                if not paths:
                    self._scans[root] = now
                    continue
                for rel in paths:
                    found = self._restore(root, rel, errors)
                    if found is not None:
                        if len(held) >= MAX_HELD_FILES:  # restored all the same; kept by name only
                            found = HeldFile(found.path, None, None, too_large=True)
                        held.append(found)
                _remove_new_dirs(root, old.dirs, scan(root).dirs)
                self._scans[root] = _rescan_like(root, old, paths)
            if not held:
                return None
            return HeldChange(tuple(held), cell_id, code[:MAX_CODE], when, tuple(errors))

    def _restore(self, root: Path, rel: str, errors: list[str]) -> HeldFile | None:
        path = root / rel
        before = self._content.get(str(path))
        current = _read(path, limit=None)
        assert not isinstance(current, _Big)
        if isinstance(before, _Big):
            return self._restore_big(path, before, current, errors)
        if current == before:
            return None  # touched, not changed
        too_large = current is not None and len(current) > MAX_HELD_BYTES
        try:
            if before is None:
                with contextlib.suppress(FileNotFoundError):
                    if path.is_dir() and not path.is_symlink():
                        raise IsADirectoryError(str(path))
                    path.unlink()
            else:
                with contextlib.suppress(FileNotFoundError):
                    if path.is_symlink():
                        path.unlink()
                write_bytes_atomic(path, before)
        except OSError as exc:
            errors.append(f"{path}: could not be restored ({exc.strerror or exc})")
        return HeldFile(str(path), before, None if too_large else current, too_large=too_large)

    def _restore_big(self, path: Path, before: _Big, current: bytes | None, errors: list[str]) -> HeldFile:
        if current is not None and len(current) >= before.size:
            if hashlib.sha256(current[: before.size]).digest() == before.digest:
                try:
                    with path.open("r+b") as fh:
                        fh.truncate(before.size)  # an append to a big log: cut back to the old end
                except OSError as exc:
                    errors.append(f"{path}: could not be restored ({exc.strerror or exc})")
                return HeldFile(str(path), None, None, too_large=True)
        errors.append(f"{path}: too large to keep a copy, left as the cell wrote it")
        return HeldFile(str(path), None, None, too_large=True)

    @contextlib.contextmanager
    def _locked(self, wait: bool = True) -> Iterator[None]:
        """The store's lock (other processes), then the in-process mutex (the store's listener)."""
        fd = None
        if fcntl is not None and self.lock_path is not None and self.lock_path.parent.is_dir():
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # type: ignore[arg-type]
                raise LockBusy(str(self.lock_path)) from None
            except OSError as exc:
                log.debug("control-plane guard without the store lock: %s", exc)
                if fd is not None:
                    os.close(fd)
                fd = None
        try:
            with self._mutex:
                yield
        finally:
            if fd is not None:
                os.close(fd)  # closing releases the flock


def _read(path: Path, limit: int | None = MAX_HELD_BYTES) -> _Content:
    """The file's bytes (a symlink as a line naming its target), `_Big` past `limit`, None if absent."""
    try:
        if path.is_symlink():
            return f"symlink -> {os.readlink(path)}\n".encode("utf-8", "surrogateescape")
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"unreadable: {exc.strerror}\n".encode()
    if limit is not None and len(data) > limit:
        return _Big(len(data), hashlib.sha256(data).digest())
    return data


def _remove_new_dirs(root: Path, before: frozenset[str], now: frozenset[str]) -> None:
    """Directories a cell created (now empty after the restore), deepest first."""
    for rel in sorted(now - before, key=lambda r: r.count(os.sep), reverse=True):
        with contextlib.suppress(OSError):
            (root / rel).rmdir()


def _rescan_like(root: Path, old: Scan, paths: Sequence[str]) -> Scan:
    """After a restore: the baseline is the fresh stat of the restored paths over the old scan."""
    fresh = scan(root)
    files = dict(old.files)
    for rel in paths:
        if rel in fresh.files:
            files[rel] = fresh.files[rel]
        else:
            files.pop(rel, None)
    return Scan(files, old.dirs)
