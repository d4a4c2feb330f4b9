"""Keep the server's own process state out of reach of the kernels it starts.

A kernel runs the model's code as the same user as the server. On Linux, a same-user process can
read `/proc/<server>/environ` (the model key) and open `/proc/<server>/fd/<n>` (the editor's
protocol pipes: forged frames both ways). Marking the server non-dumpable makes those files owned
by root and refused to same-user processes without CAP_SYS_PTRACE; the flag is reset for programs
the server execs, so the kernels themselves stay ordinary processes.

This is not a sandbox: a same-user kernel can still read the user's files, the data dir and other
processes of the user. It only stops the kernel from getting the editor's channel and the server's
secrets for free.
"""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3


def _libc() -> ctypes.CDLL | None:
    # The C library by its usual soname first: `ctypes.util.find_library` runs `ldconfig -p` (a
    # process, and ~40 ms of imports) on the server's startup path.
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        pass
    from ctypes.util import find_library

    name = find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so", use_errno=True)
    except OSError:
        return None


def make_undumpable() -> bool:
    """Make this process's /proc entries unreadable to same-user children; True when it is.

    Linux only (`prctl(PR_SET_DUMPABLE, 0)`). Elsewhere it is a no-op returning False: macOS has
    no /proc, and another process's environment is read through `sysctl(KERN_PROCARGS2)`, which
    same-user processes may use; `ptrace(PT_DENY_ATTACH)` would only block debuggers, so nothing
    equivalent is done there (a sandbox is the answer on that platform).
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = _libc()
    if libc is None:
        log.warning("cannot load libc: the server's /proc entries stay readable by its kernels")
        return False
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        log.warning("prctl(PR_SET_DUMPABLE, 0) failed (errno %d): /proc entries stay readable", errno)
        return False
    return bool(libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
