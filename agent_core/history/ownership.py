"""Which process has a session open: an exclusive `flock` on `sessions/<id>/owner.lock`.

Two servers sharing one data dir must not open the same session at once (two kernels, interleaved
transcript writes). The lock is held while the session is open here and released on close; a crashed
process's lock is released by the OS, so a stale lock file never blocks anyone. The file also holds
the owner's pid, to name it in the error and to tell a dead owner's lock from a live one's.

A dead owner's lock can outlive it by a moment: a process killed while it was starting a child
(between fork and exec) leaves that child holding a copy of its descriptors, this lock's among them,
until the child execs -- milliseconds, longer under load. An editor that kills its server and loads
the session in a new one at once met "open in another process (pid <the dead one>)". Reopening
(`acquire_when_owner_gone`) waits for such a lock, briefly and without blocking the event loop; a live
owner, or one this process cannot tell about, is refused at once as before.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from agent_core.errors import SessionInUse
from host_base.process_identity import pid_exists

LOCK_FILE = "owner.lock"
DEAD_OWNER_WAIT = 2.0  # seconds a dead owner's not yet exec'd child may still hold its lock


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


async def acquire_when_owner_gone(session_dir: Path, session_id: str) -> SessionOwnerLock:
    """`SessionOwnerLock.acquire`, waiting up to `DEAD_OWNER_WAIT` while the owner the lock file
    names is no longer running (see the module docstring); `SessionInUse` at once otherwise."""
    import asyncio  # here: the early session/new answer imports this module and no event loop

    deadline = time.monotonic() + DEAD_OWNER_WAIT
    while True:
        try:
            return SessionOwnerLock.acquire(session_dir, session_id)
        except SessionInUse as exc:
            if (
                exc.pid is None
                or exc.pid == os.getpid()
                or pid_exists(exc.pid)
                or time.monotonic() > deadline
            ):
                raise
        await asyncio.sleep(0.01)  # a lock file has no event to wait on
