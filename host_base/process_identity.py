"""Which process a pid is: alive or not, and its start time, so a recorded owner is not confused
with a reused pid.

A pid alone is not an identity: after a crash the number can be given to an unrelated process.
Owner files (runtime dirs, the kernel ledger, the quiescence file) therefore record the owner's
start time too, and a reader compares both (Linux `/proc`; elsewhere the start time is unknown and
only the pid counts).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["is_same_process", "pid_exists", "start_time"]


def pid_exists(pid: int) -> bool:
    """True when a process `pid` exists (one of another user counts). On Windows `os.kill` would
    send a console event (signal 0 is CTRL_C_EVENT there), so nothing is sent and True is assumed."""
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process with that pid
    except OSError:
        return False
    return True


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`), as
    decimal text, or None where it cannot be read (no such process, not Linux, an unexpected format)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count after the last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 and fields[19].isdigit() else None


def is_same_process(pid: int, recorded_start: str | None) -> bool:
    """True when `pid` still runs and is the process whose start time was recorded: a pid given to
    a later process has another start time. An unknown start time on either side (None: not
    recorded, or not readable here) leaves the pid alone to decide."""
    if not pid_exists(pid):
        return False
    if recorded_start is None:
        return True
    current = start_time(pid)
    return current is None or current == recorded_start
