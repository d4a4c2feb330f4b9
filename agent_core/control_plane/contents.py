"""What a path under `.continual-acp/` holds, as the guard compares it: bytes, never a stat.

A cell's files are hostile: opened without following a symlink (a link is the line naming its
target) and without blocking (a FIFO is a line naming its type, never read), and a file past
`MAX_HELD_BYTES` as its size and digest, read in chunks. Device nodes are not looked for: making
one needs a capability no cell has, and git does not store them.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass

from agent_core.control_plane.held import MAX_HELD_BYTES

__all__ = ["Big", "Content", "prefix_digest", "read_content"]

_CHUNK = 1 << 20
_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)


@dataclass(frozen=True, slots=True)
class Big:
    """A file too large to keep: its size and digest (an append can still be cut back)."""

    size: int
    digest: bytes


Content = bytes | Big | None  # None: the path holds nothing (absent, or a directory)


def read_content(path: str, limit: int = MAX_HELD_BYTES) -> Content:
    """The bytes at `path` (see the module docstring); None when absent or a directory."""
    try:
        fd = os.open(path, _FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW refused a symlink
            try:
                return f"symlink -> {os.readlink(path)}\n".encode("utf-8", "surrogateescape")
            except FileNotFoundError:
                return None
            except OSError as link_error:
                return f"unreadable link: {link_error.strerror}\n".encode()
        return f"unreadable: {exc.strerror}\n".encode()
    try:
        opened = os.fstat(fd)
        if stat.S_ISDIR(opened.st_mode):
            return None
        if not stat.S_ISREG(opened.st_mode):  # a FIFO opened without blocking: never read
            return f"special file (mode {opened.st_mode:o})\n".encode()
        want = max(min(opened.st_size, limit) + 1, 4096)
        first = os.read(fd, want)
        if len(first) < want:  # a short read of a regular file: its end
            return first if len(first) <= limit else _digest_of(first)
        return _read_rest(fd, first, limit)
    except OSError as exc:
        return f"unreadable: {exc.strerror}\n".encode()
    finally:
        os.close(fd)


def _digest_of(data: bytes) -> Big:
    return Big(len(data), hashlib.sha256(data).digest())


def _read_rest(fd: int, first: bytes, limit: int) -> Content:
    """A file that grew since its stat, or a big one: in chunks, hashed past `limit`."""
    chunks = [first]
    size = len(first)
    digest = None
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if digest is not None:
            digest.update(chunk)
            continue
        chunks.append(chunk)
        if size > limit:
            digest = hashlib.sha256(b"".join(chunks))
            chunks = []
    if digest is not None:
        return Big(size, digest.digest())
    data = b"".join(chunks)
    return data if len(data) <= limit else _digest_of(data)


def prefix_digest(path: str, size: int) -> bytes | None:
    """The digest of the first `size` bytes of the regular file `path`; None if it is shorter."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        digest = hashlib.sha256()
        left = size
        while left:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                return None
            digest.update(chunk)
            left -= len(chunk)
        return digest.digest()
    except OSError:
        return None
    finally:
        os.close(fd)
