"""Reserve the real stdout for the JSON-RPC stream.

One stray `print` (ours, a library's, a kernel's inherited fd) corrupts an ACP stream, and editors
drop agents for it. So before anything else runs we duplicate fd 1 for the transport and point fd 1
and `sys.stdout` at stderr: whatever else writes to "stdout" from then on lands in the log instead.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple


class ReservedStdio(NamedTuple):
    """The file descriptors the transport owns after `reserve_stdio()` (a NamedTuple, not a
    dataclass: this runs before `initialize` is answered, and dataclasses costs ~10 ms to import)."""

    read_fd: int
    write_fd: int


def reserve_stdio() -> ReservedStdio:
    """Take fd 0/1 for the transport; make fd 1 and `sys.stdout` aliases of stderr.

    The duplicated descriptors are non-inheritable (os.dup's default), so kernels and other child
    processes inherit fd 1 = stderr and can never write into the protocol stream.
    """
    sys.stdout.flush()
    write_fd = os.dup(1)
    read_fd = os.dup(0)
    os.dup2(2, 1)
    # Children get fd 0 = /dev/null so they cannot steal protocol bytes from stdin either.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    return ReservedStdio(read_fd=read_fd, write_fd=write_fd)
