"""The control-plane guard of one session on an unconfined backend: a cell cannot rewrite its referee.

`.continual-acp/` (gates, the project harness) changes only through the server's code paths. On
the local, gateway and provisioner backends nothing stops a cell from writing it, so the guard keeps
the tree's last VERIFIED state (every file's content) and compares the tree with it by content:

* after each cell (`check`): the files inotify names (tree_watch.py: a hint where to look, never
  evidence), every file at the tree's top level (gates.toml, config: a write through a shared
  memory map raises no event), every file with a second hard link; the whole tree when the hints cannot be trusted (no inotify,
  a file system that is not local, a new directory, a lost event) — that full compare is slow, so
  `check(wait=False)` raises `CheckInThread` and the caller runs it off the event loop;
* at a prompt's start (`refresh`) and end (`check(full=True)`): the whole tree, whatever the hints
  say. A change no store write made is held like a cell's (`when="between prompts"`): a process a
  cell left running writes after the prompt ends as well. `outside_changes="accept"` takes changes
  found at a prompt's start as a person's instead (the config's `control_plane_outside_changes`).

Where `.continual-acp` is (a symlink, a directory) is resolved at every check: a re-pointed link or
a replaced directory is a change of the whole tree; the link is put back and every file compared.
What changed is restored to the verified state and returned as a `HeldChange` for the caller to
hold as a pending review. The verified state moves only with the server's own writes (the project
store reports them through harness_store.write_listeners under its lock; the guard checks under
that same lock, so it never sees a store write half done) and with what a review approves.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.control_plane.contents import Big, Content, prefix_digest, read_content
from agent_core.control_plane.held import HeldChange, HeldFile, write_bytes_atomic
from agent_core.control_plane.location import Where, link_text, where_now
from agent_core.control_plane.repair_modes import make_listable, open_up
from agent_core.control_plane.scan import IGNORED_NAMES, IGNORED_SUFFIX, scan
from agent_core.control_plane.tree_watch import Hints, TreeWatch

__all__ = ["BETWEEN_PROMPTS", "CONTROL_DIR", "MODEL_NOTE", "CheckInThread", "ControlPlaneGuard", "LockBusy"]

log = logging.getLogger(__name__)

CONTROL_DIR = ".continual-acp"
MODEL_NOTE = (
    "[server] writes to .continual-acp/ go through harness.*; your edit is held for review "
    "(the files were restored): {paths}"
)
MAX_CODE = 4_000
MAX_HELD_FILES = 200  # files kept with their content in one held change (the rest by name)
MAX_QUICK_FILES = 256  # more files (or bytes) to compare than this: not on the event loop
MAX_QUICK_BYTES = 1 << 20
BETWEEN_PROMPTS = "between prompts"

try:
    import fcntl
except ImportError:  # Windows: the in-process lock only
    fcntl = None  # type: ignore[assignment]


class CheckInThread(Exception):
    """The check cannot finish at once here: run it again off the event loop (`wait=True`)."""


class LockBusy(CheckInThread):
    """The store lock is held (a write in progress)."""


@dataclass(slots=True)
class _Root:
    """One `.continual-acp` location and its verified state (None: no baseline yet)."""

    path: Path  # where it is looked for (its parent resolved once: the workspace)
    where: Where | None = None
    files: dict[str, Content] = field(default_factory=dict)  # relative path -> verified content
    dirs: set[str] = field(default_factory=set)
    sticky: set[str] = field(default_factory=set)  # compared at every check
    watched: bool = False  # every directory and file of the tree has its watch

    @property
    def target(self) -> str:
        assert self.where is not None
        return self.where[1]

    def rel(self, absolute: str) -> str | None:
        target = self.target
        if absolute.startswith(target + os.sep):
            return absolute[len(target) + 1 :]
        return None


class ControlPlaneGuard:
    """Watches the `.continual-acp/` directories of one session (its cwd's and its repository's)."""

    def __init__(
        self, roots: Sequence[Path], *, lock_path: Path | None = None, outside_changes: str = "hold"
    ) -> None:
        seen: list[Path] = []
        for root in roots:
            path = Path(os.path.realpath(Path(root).parent)) / Path(root).name
            if path not in seen:
                seen.append(path)
        self._roots = [_Root(path) for path in seen]
        self.lock_path = lock_path
        self.outside_changes = outside_changes
        self._mutex = threading.Lock()
        self._watch = TreeWatch()
        self._hints = Hints()  # drained, not yet compared
        self._listening: list[str] = []
        self._closed = False

    @property
    def roots(self) -> tuple[Path, ...]:
        return tuple(r.path for r in self._roots)

    def close(self) -> None:
        from harness_store import write_listeners

        with self._mutex:
            for target in self._listening:
                write_listeners.unregister(Path(target), self._server_wrote)
            self._listening.clear()
            self._watch.close()
            self._closed = True

    def _listen(self, target: str) -> None:
        # Imported here: a session's turn module loads this one before the session/new answer,
        # and harness_store (with pydantic) must load only after it.
        from harness_store import write_listeners

        if target not in self._listening and not self._closed:
            write_listeners.register(Path(target), self._server_wrote)
            self._listening.append(target)

    # ------------------------------------------------------------ baseline

    @property
    def has_baseline(self) -> bool:
        return all(root.where is not None for root in self._roots)

    def ensure_baseline(self) -> None:
        """Take the baseline now if there is none yet (the guard appeared with the first kernel)."""
        with self._locked():
            for root in self._roots:
                if root.where is None:
                    self._take(root)

    def refresh(self) -> HeldChange | None:
        """A prompt starts: compare the whole tree with the verified state. What changed meanwhile
        is held (`when="between prompts"`), or taken as the new state with `outside_changes="accept"`."""
        if self.outside_changes == "accept":
            with self._locked():
                for root in self._roots:
                    self._take(root)
            return None
        return self.check("", "", when=BETWEEN_PROMPTS, full=True)

    def _take(self, root: _Root) -> None:
        """The tree as it is now becomes the verified state (watches first: a write after a file
        is read raises an event for the next check)."""
        root.where = where_now(root.path)
        self._listen(root.target)
        found, dirs = self._rewatch(root)
        root.files, root.dirs, root.sticky = {}, set(dirs), set()
        for rel, nlink in found.items():
            root.files[rel] = read_content(os.path.join(root.target, rel))
            if nlink > 1 or os.sep not in rel:
                root.sticky.add(rel)

    def _server_wrote(self, paths: Sequence[Path]) -> None:
        """The store wrote `paths` (called under its lock): their content is verified."""
        with self._mutex:
            for path in paths:
                absolute = os.path.join(os.path.realpath(Path(path).parent), Path(path).name)
                for root in self._roots:
                    rel = root.rel(absolute) if root.where is not None else None
                    if rel is None:
                        continue
                    content = read_content(absolute)
                    if content is None:
                        root.files.pop(rel, None)
                    else:
                        root.files[rel] = content
                        self._watch.add(absolute, is_dir=False)
                        if os.sep not in rel:
                            root.sticky.add(rel)  # a referee input at the top: read every check
                        parent = os.path.dirname(rel)
                        while parent:
                            root.dirs.add(parent)
                            parent = os.path.dirname(parent)

    def verified(self, path: Path) -> bytes | None:
        """The verified content of `path` (None: absent in the verified state), for a reader that
        must not trust the disk at use time (a loop pinning its gates). `LookupError` when the
        guard has no verified bytes for it (not beneath a root, no baseline, too large to keep)."""
        absolute = os.path.join(os.path.realpath(Path(path).parent), Path(path).name)
        with self._mutex:
            for root in self._roots:
                rel = root.rel(absolute) if root.where is not None else None
                if rel is None:
                    continue
                content = root.files.get(rel)
                if isinstance(content, Big):
                    break
                return content
        raise LookupError(f"{path}: no verified content")

    def settled(self) -> bool | None:
        """Whether nothing under the tree moved since the last check, so that what was read
        meanwhile (the system prompt's harness) is the verified state: True, False (something
        moved: check, then read again), None (inotify cannot tell here, or the guard is busy)."""
        if not self._mutex.acquire(blocking=False):
            return None
        try:
            if not all(root.where is not None and root.watched for root in self._roots):
                return None
            self._absorb(self._watch.drain())
            if self._hints.full:
                return False
            for root in self._roots:
                if any(root.rel(p) is not None and not _ignored(p) for p in self._hints.paths):
                    return False
            return all(where_now(root.path) == root.where for root in self._roots)
        finally:
            self._mutex.release()

    # ------------------------------------------------------------ the check

    def check(
        self,
        cell_id: str,
        code: str,
        *,
        when: str = "while the cell ran",
        wait: bool = True,
        full: bool = False,
    ) -> HeldChange | None:
        """Compare with the verified state; restore and return what changed (None: nothing did).

        Without a baseline the first check only takes it. `wait=False` raises `CheckInThread`
        instead of waiting for the store lock or comparing the whole tree (the event loop must not
        block on either); `full=True` compares the whole tree whatever the hints say."""
        with self._locked(wait=wait):
            if any(root.where is None for root in self._roots):
                for root in self._roots:
                    if root.where is None:
                        self._take(root)
                return None
            self._absorb(self._watch.drain())
            hints = self._hints
            if not wait and (full or hints.full or not all(root.watched for root in self._roots)):
                # Not even a stat here: a file system inotify cannot vouch for may be slow to answer.
                raise CheckInThread("the whole tree to compare")
            plans: list[tuple[_Root, Where, set[str] | None]] = []
            for root in self._roots:
                now = where_now(root.path)
                whole = full or hints.full or not root.watched or now != root.where
                paths = None if whole else self._quick_paths(root, hints)
                plans.append((root, now, paths))
            if not wait and not all(p is not None and _quick(root, p) for root, _, p in plans):
                raise CheckInThread("the whole tree, or many or large files, to compare")
            self._hints = Hints()  # every hint is compared below
            held: list[HeldFile] = []
            errors: list[str] = []
            for root, now, paths in plans:
                absent = root.where is not None and root.where[2] is None
                if now != root.where:
                    moved = self._restore_root(root, now, errors)
                    if moved is not None:
                        held.append(moved)
                if paths is None:
                    self._compare_all(root, held, errors)
                    if absent and root.where != (None, root.target, None):
                        with contextlib.suppress(OSError):
                            os.rmdir(root.path)  # the directory a cell made, emptied
                        root.where = where_now(root.path)
                else:
                    for rel in sorted(paths):
                        self._compare(root, rel, held, errors)
            if not held:
                return None
            kept = [
                f if i < MAX_HELD_FILES else HeldFile(f.path, None, None, too_large=True)
                for i, f in enumerate(held)
            ]
            return HeldChange(tuple(kept), cell_id, code[:MAX_CODE], when, tuple(errors))

    def _absorb(self, drained: Hints) -> None:
        self._hints.paths |= drained.paths
        self._hints.full = self._hints.full or drained.full

    def _quick_paths(self, root: _Root, hints: Hints) -> set[str]:
        paths = set(root.sticky)
        for absolute in hints.paths:
            rel = root.rel(absolute)
            if rel is not None and not _ignored(rel):
                paths.add(rel)
        return paths

    def _compare(
        self, root: _Root, rel: str, held: list[HeldFile], errors: list[str], *, listed: bool = False
    ) -> None:
        """Compare one file; `listed`: its watch and link count were just taken by `_rewatch`."""
        absolute = os.path.join(root.target, rel)
        before = root.files.get(rel)
        current = read_content(absolute)
        if current == before:
            if current is not None and not listed:
                self._watch.add(absolute, is_dir=False)  # a replaced file: its new inode
                with contextlib.suppress(OSError):
                    if os.lstat(absolute).st_nlink > 1:  # written through another path: no event
                        root.sticky.add(rel)
            return
        found = self._restore(root, rel, before, current, errors)
        held.append(found)

    def _compare_all(self, root: _Root, held: list[HeldFile], errors: list[str]) -> None:
        found, dirs = self._rewatch(root)
        for rel in sorted(found.keys() | root.files.keys()):
            if found.get(rel, 0) > 1:
                root.sticky.add(rel)
            self._compare(root, rel, held, errors, listed=True)
        for rel in sorted(dirs - root.dirs, key=lambda r: r.count(os.sep), reverse=True):
            with contextlib.suppress(OSError):
                open_up(root.target, os.path.dirname(rel))
                os.rmdir(os.path.join(root.target, rel))  # a directory a cell made, now empty
        for rel in sorted(root.dirs - dirs):
            with contextlib.suppress(OSError):
                os.makedirs(os.path.join(root.target, rel), exist_ok=True)  # an empty one it removed

    def _rewatch(self, root: _Root) -> tuple[dict[str, int], frozenset[str]]:
        """List the tree's files (relative path -> link count) and directories, each directory's
        watch placed before it is listed and each file's after: whatever is created or written
        after the listing saw it raises an event for the next check."""
        target = root.target
        if not os.path.isdir(target):
            root.watched = True  # nothing to watch: its appearance is a change of `_where`
            return {}, frozenset()
        ok = self._watch.usable(target)

        def before_listing(directory: str) -> None:
            nonlocal ok
            make_listable(directory)
            ok = ok and self._watch.add(directory, is_dir=True)

        now = scan(Path(target), before_listing if ok else make_listable)
        if ok:
            for rel in now.files:
                self._watch.add(os.path.join(target, rel), is_dir=False)
        root.watched = ok
        return {rel: info[4] for rel, info in now.files.items()}, now.dirs

    # ------------------------------------------------------------ restore

    def _restore_root(self, root: _Root, now: Where, errors: list[str]) -> HeldFile | None:
        """`.continual-acp` itself was re-pointed, replaced, made or removed: put the verified one
        back (its files are compared after); the link's change as a held file of its own."""
        assert root.where is not None
        link, _target, identity = root.where
        path = str(root.path)
        held: HeldFile | None = None
        try:
            if link is not None:
                if now[0] != link:
                    held = HeldFile(path, link_text(link), link_text(now[0]) if now[0] else b"directory\n")
                    _replace_with_link(path, link)
            elif identity is None:  # there was none: what the cell made goes (its files are held)
                if os.path.islink(path):
                    held = HeldFile(path, None, link_text(os.readlink(path)))
                    os.unlink(path)
            else:
                if os.path.islink(path):
                    held = HeldFile(path, b"directory\n", link_text(os.readlink(path)))
                    os.unlink(path)
                os.makedirs(path, exist_ok=True)  # a directory removed or replaced: its files come back
        except OSError as exc:
            errors.append(f"{path}: could not be restored ({exc.strerror or exc})")
        restored = where_now(root.path)
        if restored[:2] != root.where[:2]:
            errors.append(f"{path}: still points elsewhere ({restored[1]})")
        root.where = restored
        self._listen(root.target)
        return held

    def _restore(
        self, root: _Root, rel: str, before: Content, current: Content, errors: list[str]
    ) -> HeldFile:
        path = os.path.join(root.target, rel)
        if isinstance(before, Big):
            return self._restore_big(path, before, errors)
        too_large = isinstance(current, Big)
        after = None if isinstance(current, Big) else current
        try:
            open_up(root.target, os.path.dirname(rel))
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)  # a directory where the file was (symlinks in it are not followed)
            elif current is not None:
                with contextlib.suppress(FileNotFoundError):
                    info = os.lstat(path)
                    if not stat.S_ISREG(info.st_mode) or before is None:
                        os.unlink(path)
            if before is not None:
                write_bytes_atomic(Path(path), before)
                self._watch.add(path, is_dir=False)
        except OSError as exc:
            errors.append(f"{path}: could not be restored ({exc.strerror or exc})")
        return HeldFile(path, before, after, too_large=too_large)

    def _restore_big(self, path: str, before: Big, errors: list[str]) -> HeldFile:
        if prefix_digest(path, before.size) == before.digest:
            try:
                with open(path, "r+b") as fh:
                    fh.truncate(before.size)  # an append to a big log: cut back to the old end
            except OSError as exc:
                errors.append(f"{path}: could not be restored ({exc.strerror or exc})")
            return HeldFile(path, None, None, too_large=True)
        errors.append(f"{path}: too large to keep a copy, left as the cell wrote it")
        return HeldFile(path, None, None, too_large=True)

    @contextlib.contextmanager
    def _locked(self, wait: bool = True) -> Iterator[None]:
        """The store's lock (other processes), then the in-process mutex (the store's listener)."""
        fd = None
        if fcntl is not None and self.lock_path is not None and self.lock_path.parent.is_dir():
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
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


def _quick(root: _Root, paths: set[str]) -> bool:
    """Few and small enough to read on the event loop (a cell may have written a huge file)."""
    if len(paths) > MAX_QUICK_FILES:
        return False
    total = 0
    for rel in paths:
        with contextlib.suppress(OSError):
            total += os.lstat(os.path.join(root.target, rel)).st_size
    return total <= MAX_QUICK_BYTES


def _replace_with_link(path: str, link: str) -> None:
    """Make `path` the symlink to `link` again, in one rename (a directory in its place is removed)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    temp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    os.symlink(link, temp)
    os.replace(temp, path)


def _ignored(rel: str) -> bool:
    """The store's lock and temp files: written and removed under its lock, never read as content."""
    name = os.path.basename(rel)
    return name in IGNORED_NAMES or (name.startswith(".") and name.endswith(IGNORED_SUFFIX))
