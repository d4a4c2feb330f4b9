"""Private files on disk: the one atomic write and the one private directory.

`write_atomic` replaces a file so a reader sees the old bytes or the new ones, never a mix: the
bytes go to a temp file in the same directory (created 0600, never following a link), are flushed
and fsynced, get their final mode, and are renamed over the target; on any failure the temp file
is removed and the error raised. `private_dir` creates a directory and its missing parents 0700
(`mkdir(parents=True)` gives the mode to the last one only).

The harness, the agent and the server keep their private state through these (agent_core
re-exports them for acp_server).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
from pathlib import Path

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def private_dir(path: Path, *, exact: bool = False) -> None:
    """Create `path` and any missing parents with mode 0700; `exact` also makes an existing
    `path` 0700. A dangling link counts as existing (never followed into). Raises OSError."""
    absent = list(itertools.takewhile(lambda p: not os.path.lexists(p), [path, *path.parents]))
    for directory in reversed(absent):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            directory.mkdir(mode=0o700)
    if exact:
        os.chmod(path, 0o700)


def temp_path(path: Path, mark: str = ".tmp") -> Path:
    """A fresh temp name beside `path` (`.<name>.<pid>-<random><mark>`): hidden, unique per writer."""
    return path.parent / f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{mark}"


def write_atomic(
    path: Path,
    data: bytes | str,
    *,
    mode: int | None = 0o600,
    temp: Path | None = None,
    sync: bool = True,
    sync_dir: bool = False,
) -> None:
    """Replace `path` with `data` atomically (see the module docstring). Raises OSError.

    `mode` None keeps an existing file's mode (new files 0600); `temp` names the temp file (default
    `temp_path(path)`; an existing file of that name is replaced); `sync` False skips the fsync of
    a live signal nobody must find after a crash; `sync_dir` also fsyncs the directory, making the
    rename itself durable.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    final = mode
    if final is None:
        try:
            final = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            final = 0o600
    temp = temp if temp is not None else temp_path(path)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        try:
            if hasattr(os, "fchmod"):  # Windows Python < 3.13 has none; the mode is POSIX only
                os.fchmod(fd, final)
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if sync_dir:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable; a no-op where the platform or filesystem has none."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
