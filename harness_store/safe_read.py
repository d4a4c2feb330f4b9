"""Reading a file the workspace controls: a regular file only, never blocking, never past a size cap.

A repository is data, and hostile data can be shaped to hang or flood a reader: a FIFO named
`SKILL.md` (a plain `open()` waits for a writer forever), a symlink to `/dev/zero` (a read never
ends), a symlink loop, a 60 MB entry file, a symlink to `/proc/self/environ` (a "regular" file of
size 0 that holds the server's secrets). Every read of a workspace path goes through `read_bytes`
or `read_text` here:

* opened with `O_NONBLOCK` (a FIFO opens at once instead of waiting for a writer) and `O_CLOEXEC`,
  plus `O_NOFOLLOW` unless the caller follows a final symlink on purpose (a skill folder linked
  from elsewhere is a feature; what it points at is still checked on the opened descriptor);
* checked on that descriptor with `fstat`: anything but a regular file is refused, as is a file
  whose size says 0 but that yields bytes (a kernel pseudo-file such as `/proc/self/environ`);
* read up to the caller's cap (`ENTRY_MAX_BYTES`, `CONFIG_MAX_BYTES`): a larger file is refused
  from its size before a byte is read, and one that grows while read stops at the cap.

A refusal is `Refused` (an OSError, so callers that already skip unreadable files skip these too).
`warn_once` logs a skipped path one time per process, not once per prompt. Reads can still be slow
(a network file system): callers on an event loop run them in a worker thread. Stdlib only: the
skills package ships this module into kernels that run another interpreter.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
from pathlib import Path

# An entry file, a SKILL.md, a prompt file the project keeps: text a prompt may show. 1 MiB is far
# above any real one (the prompt shows a bounded overview) and far below what could stall a read.
ENTRY_MAX_BYTES = 1024 * 1024
# A configuration file (TOML, JSON): settings, gates, MCP servers.
CONFIG_MAX_BYTES = 256 * 1024
# An append-only file the repository keeps (the project harness history, its tombstones).
HISTORY_MAX_BYTES = 64 * 1024 * 1024

_log = logging.getLogger(__name__)
_warned: set[str] = set()
_warned_lock = threading.Lock()


class Refused(OSError):
    """The path is not something to read: not a regular file, a loop, or over the cap."""


def _describe(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def _open_regular(path: str | os.PathLike[str], follow: bool) -> tuple[int, os.stat_result]:
    """An open descriptor of the regular file at `path` and its fstat; `Refused` for anything else."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            reason = "a symlink loop" if follow else "a symlink"
            raise Refused(exc.errno, f"{reason}, not read", str(path)) from None
        if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # a socket, or a device with no reader
            raise Refused(exc.errno, "not a regular file, not read", str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(errno.EINVAL, f"{_describe(info.st_mode)}, not read", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _read_upto(fd: int, count: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < count:
        chunk = os.read(fd, min(count - size, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _check_pseudo(path: str | os.PathLike[str], info: os.stat_result, data: bytes) -> None:
    if data and info.st_size == 0:
        # procfs and sysfs report size 0 for files that produce bytes (`/proc/self/environ`).
        raise Refused(errno.EINVAL, "a kernel pseudo-file, not read", str(path))


def read_bytes(path: str | os.PathLike[str], *, limit: int, follow: bool = False, offset: int = 0) -> bytes:
    """The bytes of the regular file at `path` from `offset` (at most `limit` of them); `Refused` for
    anything else.

    `follow=False` refuses a final-component symlink (`O_NOFOLLOW`); symlinks in the directories
    above are followed either way. FileNotFoundError and other OSErrors pass through as they are.
    """
    fd, info = _open_regular(path, follow)
    try:
        if offset:
            os.lseek(fd, offset, os.SEEK_SET)
        if info.st_size - offset > limit:
            raise Refused(errno.EFBIG, f"{info.st_size} bytes, over the {limit}-byte cap", str(path))
        data = _read_upto(fd, limit + 1)
    finally:
        os.close(fd)
    _check_pseudo(path, info, data)
    if len(data) > limit:
        raise Refused(errno.EFBIG, f"grew past the {limit}-byte cap while read", str(path))
    return data


def read_prefix(path: str | os.PathLike[str], count: int, *, follow: bool = False) -> bytes:
    """The first `count` bytes of the regular file at `path` (a header, e.g. YAML frontmatter): a
    longer file is not refused, only cut. The same checks as `read_bytes` otherwise."""
    fd, info = _open_regular(path, follow)
    try:
        data = _read_upto(fd, count)
    finally:
        os.close(fd)
    _check_pseudo(path, info, data)
    return data


def read_text(
    path: str | os.PathLike[str], *, limit: int, follow: bool = False, encoding: str = "utf-8"
) -> str:
    """`read_bytes` decoded (UnicodeDecodeError passes through, as `Path.read_text` raises it)."""
    return read_bytes(path, limit=limit, follow=follow).decode(encoding)


def is_regular(path: str | os.PathLike[str], *, follow: bool = False) -> bool:
    """Whether `path` is a regular file, without opening it (`Path.is_file()` says yes to nothing
    it cannot stat, but follows a final symlink; this follows only when asked). A listing filter:
    the read itself still checks the descriptor, since the file can change in between."""
    try:
        mode = os.stat(path, follow_symlinks=follow).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(mode)


def warn_once(path: str | os.PathLike[str], reason: object, logger: logging.Logger | None = None) -> None:
    """Log that `path` was skipped, once per process (a hostile file is not news on every prompt)."""
    key = str(Path(path))
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    (logger or _log).warning("skipped %s: %s", key, reason)
