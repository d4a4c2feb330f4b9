"""Where in `.continual-acp/` something may have changed since the last look: the kernel's inotify.

A hint, never evidence: the guard compares the paths named here by content. One inotify instance per
guard (its own queue: events are consumed only by the check that then compares those paths) watches
every directory of the tree and every file in it. A file's own watch follows its inode, so a write
through a hard link made elsewhere is seen as well; a directory's watch sees what is created,
renamed or removed in it.

What events cannot say, and the guard's answer:

* a new directory (its files may be written before its watch exists), a directory renamed or
  removed, a watch gone, a queue overflow: `full` (the guard compares the whole tree by content);
* a write through a shared memory map raises no event (inotify(7)), and on tmpfs moves no time
  stamp either: the top-level files (gates.toml, config) are compared at every check, the whole
  tree at each prompt's start and end (before the prompt's system prompt and gates are read);
* no inotify here, the watch limit reached, a file system that is not local (another machine's
  write to NFS raises nothing here): `trusted` is False and every check compares the whole tree.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import struct
from dataclasses import dataclass, field

from harness_store.dir_watch import LOCAL_FILE_SYSTEMS, file_system

__all__ = ["Hints", "TreeWatch"]

log = logging.getLogger(__name__)

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED, _IN_ISDIR = 0x4000, 0x8000, 0x40000000
_IN_ONLYDIR, _IN_DONT_FOLLOW = 0x1000000, 0x2000000
_SELF = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_DELETE_SELF | _IN_MOVE_SELF
_DIR_MASK = _SELF | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE | _IN_ONLYDIR | _IN_DONT_FOLLOW
_FILE_MASK = _SELF | _IN_DONT_FOLLOW
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then `len` bytes of name)


@dataclass(slots=True)
class Hints:
    """What the queue said since the last drain: absolute paths to compare, or `full`."""

    paths: set[str] = field(default_factory=set)
    full: bool = False


class TreeWatch:
    """Watches of the directories and files beneath some roots, read without blocking."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._libc: ctypes.CDLL | None = None
        self._failed = False
        self._lost = False  # its queue failed: what it watched is not watched any more
        self._paths: dict[int, tuple[str, bool]] = {}  # watch -> (absolute path, is a directory)
        self._local: dict[str, bool] = {}  # root -> on a local file system

    # ------------------------------------------------------------ setup

    def usable(self, root: str) -> bool:
        """Whether events beneath `root` can be trusted at all (inotify here, a local file system)."""
        if not self._open():
            return False
        local = self._local.get(root)
        if local is None:
            from pathlib import Path

            local = self._local[root] = file_system(Path(root)) in LOCAL_FILE_SYSTEMS
        return local

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
            log.info("no inotify for the control-plane guard: every check compares the whole tree")
            return False
        self._fd, self._libc = fd, libc
        return True

    def add(self, path: str, *, is_dir: bool) -> bool:
        """Watch `path` (the same watch again for the same inode); False when it cannot be watched."""
        if not self._open():
            return False
        assert self._libc is not None
        wd = int(
            self._libc.inotify_add_watch(self._fd, os.fsencode(path), _DIR_MASK if is_dir else _FILE_MASK)
        )
        if wd < 0:
            code = ctypes.get_errno()
            if code not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                log.info("cannot watch %s (%s): the guard compares the whole tree", path, os.strerror(code))
            return False
        self._paths[wd] = (path, is_dir)
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._failed = None, True
        self._paths.clear()

    # ------------------------------------------------------------ events

    def drain(self) -> Hints:
        """Every queued event, as the paths to compare."""
        hints = Hints()
        if self._fd is None:
            hints.full = self._lost  # never opened: nothing was watched (the guard knows)
            return hints
        while True:
            try:
                data = os.read(self._fd, 256 * 1024)
            except BlockingIOError:
                return hints
            except OSError as exc:
                log.warning("inotify read failed (%s): the guard compares the whole tree", exc)
                self.close()
                self._lost = True
                hints.full = True
                return hints
            self._parse(data, hints)

    def _parse(self, data: bytes, hints: Hints) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
            offset += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                hints.full = True
                continue
            known = self._paths.get(wd)
            if known is None:
                continue  # a watch already dropped (a file replaced since)
            path, is_dir = known
            if mask & _IN_IGNORED:
                del self._paths[wd]
                if is_dir:
                    hints.full = True  # a directory gone (or its watch): its contents are unwatched
                else:
                    hints.paths.add(path)
                continue
            if is_dir and raw:
                child = os.path.join(path, os.fsdecode(raw))
                if mask & _IN_ISDIR:
                    hints.full = True  # a directory made, renamed or removed beneath the tree
                hints.paths.add(child)
            elif is_dir:
                if mask & (_IN_DELETE_SELF | _IN_MOVE_SELF):
                    hints.full = True
            else:
                hints.paths.add(path)
                if mask & _IN_MOVE_SELF:  # renamed: the watch follows the inode elsewhere
                    self._drop(wd)

    def _drop(self, wd: int) -> None:
        self._paths.pop(wd, None)
        if self._fd is not None and self._libc is not None:
            self._libc.inotify_rm_watch(self._fd, wd)
