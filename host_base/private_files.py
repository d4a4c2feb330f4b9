"""Private files on disk: the one atomic write and the one private directory.

`write_atomic` replaces a file so a reader sees the old bytes or the new ones, never a mix: the
bytes go to a temp file in the same directory (created 0600, never following a link), are flushed
and (unless told not to) fsynced, get their final mode, and are renamed over the target, which
replaces a symlink standing there instead of writing through it; on any failure the temp file is
removed and the error raised. `write_atomic_with` is the same for a writer that streams into the
temp file (a large copy). `create_private` writes a file that must not exist yet (a new session's
transcript, a file set aside): created 0600 and exclusively, so neither an existing file nor a
link planted at the name is written through. `private_dir` creates a directory and its missing parents 0700
(`mkdir(parents=True)` gives the mode to the last one only).

Imports nothing beyond what the interpreter has loaded at start (no `secrets`: ~6 ms on the
server's startup path), so a writer on that path may use it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["create_private", "fsync_dir", "private_dir", "temp_path", "write_atomic", "write_atomic_with"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def private_dir(path: Path, *, exact: bool = True) -> Path:
    """Create `path` and any missing parents with mode 0700 and return `path`; `exact` (the
    default) also makes an existing `path` 0700. A dangling link counts as existing (never
    followed into). Raises OSError."""
    absent = list(itertools.takewhile(lambda p: not os.path.lexists(p), [path, *path.parents]))
    for directory in reversed(absent):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            directory.mkdir(mode=0o700)
    if exact:
        os.chmod(path, 0o700)
    return path


def temp_path(path: Path, mark: str = ".tmp") -> Path:
    """A fresh temp name beside `path` (`.<name>.<pid>-<random><mark>`): hidden, unique per writer."""
    return path.parent / f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}{mark}"


def write_atomic(
    path: Path,
    data: bytes | str,
    *,
    mode: int | None = 0o600,
    temp: Path | None = None,
    sync: bool = True,
    sync_dir: bool = False,
) -> None:
    """Replace `path` with `data` (str is written as UTF-8) atomically (see the module docstring).
    Raises OSError.

    `mode` None keeps an existing file's mode (new files 0600); `temp` names the temp file (default
    `temp_path(path)`; an existing file of that name is replaced, a link of that name is refused);
    `sync` False skips the fsync of a live signal nobody must find after a crash; `sync_dir` also
    fsyncs the directory, making the rename itself durable.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    write_atomic_with(
        path, lambda handle: handle.write(raw), mode=mode, temp=temp, sync=sync, sync_dir=sync_dir
    )


def write_atomic_with(
    path: Path,
    write: Callable[[BinaryIO], object],
    *,
    mode: int | None = 0o600,
    temp: Path | None = None,
    sync: bool = True,
    sync_dir: bool = False,
) -> None:
    """`write_atomic` for a writer: `write(handle)` fills the temp file (a binary file object);
    if it raises, the target is left as it was and the temp file is removed."""
    final = mode
    if final is None:
        try:
            final = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            final = 0o600
    temp = temp if temp is not None else temp_path(path)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            if hasattr(os, "fchmod"):  # Windows Python < 3.13 has none; the mode is POSIX only
                os.fchmod(handle.fileno(), final)
            write(handle)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.replace(temp, path)  # renames over a symlink at `path`: the link is replaced, not followed
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if sync_dir:
        fsync_dir(path.parent)


def create_private(path: Path, data: bytes | str, *, sync: bool = False, append: bool = False) -> None:
    """Create `path` (mode 0600) with `data`; FileExistsError when anything (a file, a link) is
    there already. `sync` fsyncs the file; `append` opens it O_APPEND, as its later writers do.
    Not atomic: a reader may see it partly written (its readers do not look before it is named)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | (os.O_APPEND if append else 0)
    with os.fdopen(os.open(path, flags, 0o600), "wb") as handle:
        handle.write(raw)
        if sync:
            handle.flush()
            os.fsync(handle.fileno())


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
