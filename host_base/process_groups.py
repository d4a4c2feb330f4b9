"""Process groups: killing a whole group, and killing and reaping a child that leads one.

A command the server starts leads its own session and process group (`start_new_session=True`),
so whatever it starts in turn ends with it: one `killpg` reaches the grandchildren too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

__all__ = ["kill_and_reap", "kill_group"]


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send `sig` to process group `pgid`; a group already gone (or not ours) is no error.

    A `pgid` <= 1 is refused (ValueError): `killpg(0)` is the caller's own group and 1 is init's.
    """
    if pgid <= 1:
        raise ValueError(f"not a process group to kill: {pgid}")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_and_reap(process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> int:
    """SIGKILL the group `process` leads (started with `start_new_session=True`), then the process
    itself (in case it left its group), and wait for it; returns its exit status."""
    with contextlib.suppress(OSError):
        kill_group(process.pid)
    process.kill()
    return process.wait()
