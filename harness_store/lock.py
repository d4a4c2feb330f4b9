"""An exclusive inter-process lock on a file beside the store (beyond 1: cross-process safety).

Two editor windows run two server processes that share the global store; every read-modify-write
happens under this lock. POSIX uses `fcntl.flock` (released by the kernel if the holder dies, so a
kill -9 never leaves the store locked); Windows falls back to `msvcrt.locking`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import TracebackType

from harness_store.errors import HarnessStoreError

DEFAULT_TIMEOUT = 30.0


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


class StoreLock:
    """`with StoreLock(path):` holds the lock; raises `HarnessStoreError` after `timeout` seconds."""

    def __init__(self, path: Path, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> StoreLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise HarnessStoreError(
                f"cannot open the harness lock file {self.path}: {exc.strerror}; check that the directory is writable"
            ) from exc
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        try:
            # Non-blocking attempts with a short back-off: a blocking flock cannot time out.
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    raise HarnessStoreError(
                        f"timed out after {self.timeout:g} s waiting for the harness lock {self.path}; "
                        "another continual-acp process is holding it"
                    )
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        except BaseException as exc:
            os.close(fd)  # never leak the descriptor, whatever ended the wait
            if isinstance(exc, OSError):
                raise HarnessStoreError(
                    f"cannot lock the harness lock file {self.path}: {exc.strerror or exc}; "
                    "the store must be on a filesystem that supports file locks"
                ) from exc
            raise
        self._fd = fd
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                _unlock(fd)
            finally:
                os.close(fd)


def held_elsewhere(path: Path) -> bool:
    """True when some other open file description holds the lock at `path` right now.

    Only a hint for wording a log line: the answer may change as soon as it is given.
    """
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        if _try_lock(fd):
            _unlock(fd)
            return False
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
