"""Which process has a session open: an exclusive `flock` on `sessions/<id>/owner.lock`.

Two servers sharing one data dir must not open the same session at once (two kernels, interleaved
transcript writes). The lock is held while the session is open here and released on close; a crashed
process's lock is released by the OS, so a stale lock file never blocks anyone. The file also holds
the owner's pid, only to name it in the error.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from agent_core.errors import SessionInUse

LOCK_FILE = "owner.lock"


class SessionOwnerLock:
    """An acquired ownership lock; `release()` (idempotent) lets another process open the session."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, session_dir: Path, session_id: str) -> SessionOwnerLock:
        """Lock `session_dir` (which must exist) for this process; `SessionInUse` when another has it."""
        path = session_dir / LOCK_FILE
        # O_NOFOLLOW: a symlink planted as the lock file must not make us write outside the data dir.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise SessionInUse(session_id, pid) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(fd, path)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
