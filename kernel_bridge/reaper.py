"""Process-wide record of live kernel process groups, killed when the server exits.

Kernels are started in their own session (process group), so killing the group also ends whatever
the kernel spawned (`%%bash` jobs, test runners). SIGKILL of the server cannot run any of this; that
case is covered by `group_watch`: each kernel (its launch code runs `group_watch.ParentWatch` on the
`JPY_PARENT_PID` ipykernel is given), MCP server and gate group watches its parent and SIGKILLs
itself when the parent dies.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import threading
from pathlib import Path
from types import FrameType

from host_base import process_groups

log = logging.getLogger(__name__)

_groups: dict[int, int] = {}
_directories: set[Path] = set()
# Re-entrant: the SIGTERM handler may run while the main thread is inside track()/forget().
_lock = threading.RLock()
_installed = False


def track(pid: int) -> None:
    """Remember a kernel process (its process group id equals its pid: it leads a new session)."""
    if pid <= 0:
        return
    _install()
    pgid = pid
    if hasattr(os, "getpgid"):
        with contextlib.suppress(OSError):
            pgid = os.getpgid(pid)
    with _lock:
        _groups[pid] = pgid


def forget(pid: int) -> None:
    """Stop tracking a kernel process (it was shut down by its owner)."""
    with _lock:
        _groups.pop(pid, None)


def kill_group(pid: int) -> None:
    """SIGKILL the kernel's process group (or the process alone where groups do not exist).

    A pid <= 0 (a kernel whose process this host does not know, e.g. from a custom launcher) is
    ignored: `kill(-1)` would signal every process of this user and `kill(0)` our own group.
    """
    if pid <= 0:
        log.debug("not killing kernel pid %d: not a real process id", pid)
        return
    with _lock:
        pgid = _groups.get(pid, pid)
    if hasattr(os, "killpg") and pgid > 1 and pgid != os.getpgrp():
        process_groups.kill_group(pgid)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))


def remove_on_exit(directory: Path) -> None:
    """Delete `directory` (a pool's private runtime dir) at exit or SIGTERM, after the kernels.

    Without this every server killed by SIGTERM left its connection files and sockets in the temp
    dir; only SIGKILL, which runs nothing, still does.
    """
    _install()
    with _lock:
        _directories.add(directory)


def keep_on_exit(directory: Path) -> None:
    """Forget a directory given to `remove_on_exit` (its owner removed it already)."""
    with _lock:
        _directories.discard(directory)


def kill_all() -> None:
    """Kill every tracked kernel group now, then remove the registered runtime dirs (atexit, SIGTERM)."""
    with _lock:
        pids = list(_groups)
        directories = list(_directories)
        _directories.clear()
    for pid in pids:
        kill_group(pid)
        forget(pid)
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    kill_all()
    # Then die of SIGTERM as if we had not been here, so the exit status stays honest.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(kill_all)
    # Only take SIGTERM when nobody else has: a server with its own graceful handler keeps it and
    # reaches kernels through KernelPool.aclose().
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM"):
        try:
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError) as exc:
            log.debug("could not install SIGTERM handler: %s", exc)
