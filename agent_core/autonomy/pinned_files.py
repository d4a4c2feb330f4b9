"""A file's content as a gate pin compares it: read as data (regular files only, opened non-blocking,
so a FIFO is never waited on), digested in chunks; a file over `MAX_DIGEST_BYTES` by size and mtime.
"""

from __future__ import annotations

import hashlib
import os
import stat

MAX_DIGEST_BYTES = 512 << 20  # larger files are pinned by size and mtime


def read_head(path: str, size: int) -> bytes:
    """The first `size` bytes of a regular file; empty when absent, not regular or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, size)
    except OSError:
        return b""
    finally:
        os.close(fd)


def file_digest(path: str | None) -> str | None:
    """sha256 of a regular file (None: absent, not regular, unreadable); a file over
    `MAX_DIGEST_BYTES` by size and mtime."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > MAX_DIGEST_BYTES:
            return f"size:{info.st_size}:mtime:{info.st_mtime_ns}"
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)
