"""What a path under `.continual-acp/` holds, as the guard compares it: bytes, never a stat.

A cell's files are hostile: read without following a symlink (a link is the line naming its
target), without blocking (a FIFO or a device is a line naming its type, never opened for reading
past `open`), and a file past `MAX_HELD_BYTES` as its size and digest, read in chunks.
"""

from __future__ import annotations

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
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"unreadable: {exc.strerror}\n".encode()
    if stat.S_ISDIR(info.st_mode):
        return None
    if stat.S_ISLNK(info.st_mode):
        try:
            return f"symlink -> {os.readlink(path)}\n".encode("utf-8", "surrogateescape")
        except OSError as exc:
            return f"unreadable link: {exc.strerror}\n".encode()
    if not stat.S_ISREG(info.st_mode):
        return f"special file (mode {info.st_mode:o})\n".encode()
    try:
        fd = os.open(path, _FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"unreadable: {exc.strerror}\n".encode()
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):  # swapped between the lstat and the open
            return f"special file (mode {opened.st_mode:o})\n".encode()
        chunks: list[bytes] = []
        size = 0
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
        return b"".join(chunks)
    except OSError as exc:
        return f"unreadable: {exc.strerror}\n".encode()
    finally:
        os.close(fd)


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
