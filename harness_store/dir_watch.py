"""Whether anything in a few directories changed since a moment, without a stat of every file.

A project harness is one file per entry, and a prompt reads it: with thousands of entries, a stat of
each file (to see that none changed) is most of the prompt's harness cost. The kernel's inotify
says the same thing in one non-blocking read: no event on a directory since the scan means no file
in it was created, written, renamed or removed. `DirWatch.arm()` is called right before a scan,
`changed()` before the next read; events reach the queue before the writing call returns, so a
write that finished before a read began is always seen.

Where that cannot be trusted `changed()` is always True and the caller scans as before: no inotify
(not Linux, no libc symbol, the per-user instance or watch limit reached), a directory that does
not exist and whose parent is not watched, or a file system that is not local (a write made on
another machine to an NFS or SMB mount raises no event here). One inotify instance serves the
whole process; watches are never removed (a few per repository a session has worked in).

What a directory's events cannot tell: a write to a file through a path outside it. For a symlink
in it the caller checks file by file (repository_backend.py does while an entry is a link); a write
through a hard link elsewhere goes unseen (git never makes them; finding them would need the stat
of each file this module avoids). The process must not fork without exec: the child would read
events off the same queue.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import struct
import threading
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("harness_store")

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_ONLYDIR = 0x400, 0x800, 0x1000000
_IN_Q_OVERFLOW, _IN_IGNORED = 0x4000, 0x8000
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then `len` bytes of name)

# File systems whose writes, from any process that can write them, raise inotify events here.
LOCAL_FILE_SYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs", "ramfs", "jfs", "reiserfs"}
)


def file_system(path: Path) -> str | None:
    """The type of the file system `path` is on (from /proc/self/mounts), None when unknown."""
    try:
        real = os.path.realpath(path)
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as fh:
            mounts = [line.split() for line in fh]
    except OSError:
        return None
    best, kind = "", None
    for fields in mounts:
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


class _Inotify:
    """The process's one inotify instance: event counts per watch, read without blocking."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._fd: int | None = None
        self._libc: ctypes.CDLL | None = None
        self._failed = False
        self.counts: dict[int, int] = {}  # watch -> events seen on it so far
        self.alive: set[int] = set()
        self.overflows = 0

    def _open(self) -> bool:
        if self._fd is not None:
            return True
        if self._failed:
            return False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        except (OSError, AttributeError):
            fd = -1
        if fd < 0:
            self._failed = True
            log.info("no inotify here: the project harness is checked file by file on each read")
            return False
        self._fd, self._libc = fd, libc
        return True

    def watch(self, path: Path) -> int | None:
        """The watch of directory `path` (the same one for the same directory), None when it cannot be had."""
        if not self._open():
            return None
        assert self._libc is not None
        wd = int(self._libc.inotify_add_watch(self._fd, os.fsencode(path), _MASK))
        if wd < 0:
            code = ctypes.get_errno()
            if code not in (errno.ENOENT, errno.ENOTDIR):
                log.info("cannot watch %s (%s): checked file by file", path, os.strerror(code))
            return None
        self.alive.add(wd)
        self.counts.setdefault(wd, 0)
        return wd

    def drain(self) -> None:
        """Count every queued event against its watch."""
        if self._fd is None:
            return
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("inotify read failed (%s): checked file by file from now on", exc)
                os.close(self._fd)
                self._fd, self._failed = None, True
                self.alive.clear()
                return
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size + length
                if mask & _IN_Q_OVERFLOW:
                    self.overflows += 1
                    continue
                self.counts[wd] = self.counts.get(wd, 0) + 1
                if mask & _IN_IGNORED:  # the directory went away (or the watch did)
                    self.alive.discard(wd)


_SHARED = _Inotify()


class DirWatch:
    """Whether any of `dirs` changed since the last `arm()`. List a directory's parent before it:
    a directory that does not exist yet is covered by its parent's watch."""

    def __init__(self, dirs: Sequence[Path]) -> None:
        self.dirs = tuple(dirs)
        self._marks: dict[int, int] | None = None
        # Each watched directory's (device, inode) at arm(): a watch follows its inode, so a
        # directory swapped in under the same path (an unwatched parent renamed) raises nothing.
        self._identities: tuple[tuple[str, tuple[int, int]], ...] = ()
        self._overflows = 0
        self._trusted = False
        # The directories' identities the mount table was last read for: read again whenever one
        # differs (one appeared, or was swapped), e.g. `.continual-acp` made later as a link elsewhere.
        self._checked_for: tuple[tuple[int, int] | None, ...] | None = None

    def arm(self) -> None:
        """Start counting from now: call it right before reading what the directories hold."""
        self._marks = None
        found = [(d, _identity(d)) for d in self.dirs]  # before the watches: a swap between is a change
        key = tuple(identity for _, identity in found)
        if key != self._checked_for:
            self._checked_for = key
            present = [d for d, identity in found if identity is not None]
            self._trusted = bool(present) and all(file_system(d) in LOCAL_FILE_SYSTEMS for d in present)
        if not self._trusted:
            return
        with _SHARED.lock:
            _SHARED.drain()
            marks: dict[int, int] = {}
            watched: set[Path] = set()
            identities: list[tuple[str, tuple[int, int]]] = []
            for directory, identity in found:
                wd = _SHARED.watch(directory) if identity is not None else None
                if wd is None or identity is None:
                    if directory.parent in watched and not directory.is_symlink() and not directory.exists():
                        continue  # its creation is an event on the parent (a dangling link's target's is not)
                    return
                watched.add(directory)
                identities.append((str(directory), identity))
                marks[wd] = _SHARED.counts[wd]
            self._marks, self._overflows = marks, _SHARED.overflows
            self._identities = tuple(identities)

    def changed(self) -> bool:
        """True when something in the directories may have changed since `arm()` (always, when
        unwatched)."""
        marks = self._marks
        if marks is None:
            return True
        with _SHARED.lock:
            _SHARED.drain()
            if _SHARED.overflows != self._overflows:
                return True
            if any(wd not in _SHARED.alive or _SHARED.counts.get(wd) != seen for wd, seen in marks.items()):
                return True
        # One stat per directory (a handful), not per file: still the path's directory?
        return any(_identity(path) != identity for path, identity in self._identities)


def _identity(path: Path | str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino
