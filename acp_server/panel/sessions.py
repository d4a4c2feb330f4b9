"""The sessions under a data home, and which of them a server process has open right now.

A server holds an exclusive `flock` on `sessions/<id>/owner.lock` while a session is open
(agent_core/history/ownership.py). Probing that lock by trying to take it could make a server opening the
session at that instant fail with "session in use", so on Linux the panel reads `/proc/locks`
instead (it lists every held lock by device and inode, without touching it). Elsewhere the open
state is reported as unknown (None). The same owner state tells a live session's published
quiescence (`sessions/<id>/quiescence.json`) from a stale one (`published_quiescence`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OWNER_LOCK = "owner.lock"  # agent_core.history.ownership.LOCK_FILE
PROC_LOCKS = Path("/proc/locks")


@dataclass(frozen=True)
class SessionInfo:
    """What the panel shows about one session directory."""

    session_id: str
    title: str | None
    cwd: str
    open: bool | None  # None: not knowable on this platform
    owner_pid: int | None
    pending_reviews: int
    has_harness: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "title": self.title,
            "cwd": self.cwd,
            "open": self.open,
            "owner_pid": self.owner_pid,
            "pending_reviews": self.pending_reviews,
            "has_harness": self.has_harness,
        }


def session_ids(home: Path) -> list[str]:
    """Every session directory name under `<home>/sessions`, sorted."""
    try:
        names = os.listdir(home / "sessions")
    except OSError:
        return []
    return sorted(n for n in names if not n.startswith(".") and (home / "sessions" / n).is_dir())


def held_flocks() -> dict[tuple[int, int], int] | None:
    """`{(st_dev, st_ino): pid}` of every flock held on this machine; None when not readable."""
    try:
        text = PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    held: dict[tuple[int, int], int] = {}
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->" after the index.
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            pid = int(parts[4])
            major, minor, inode = parts[5].split(":")
            device = os.makedev(int(major, 16), int(minor, 16))
            held[(device, int(inode))] = pid
        except ValueError:
            continue
    return held


def owner_of(session_dir: Path, flocks: dict[tuple[int, int], int] | None) -> tuple[bool | None, int | None]:
    """(open, owner pid) of one session from a `held_flocks()` snapshot."""
    if flocks is None:
        return None, None
    try:
        info = os.stat(session_dir / OWNER_LOCK)
    except OSError:
        return False, None
    pid = flocks.get((info.st_dev, info.st_ino))
    return pid is not None, pid


def _meta(session_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((session_dir / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def session_cwd(home: Path, session_id: str) -> Path | None:
    """The working directory a session was opened in (`meta.json`), or None when not recorded."""
    cwd = _meta(home / "sessions" / session_id).get("cwd")
    return Path(cwd) if isinstance(cwd, str) and os.path.isabs(cwd) else None


def count_pending(directory: Path) -> int:
    """How many proposals wait in a store's `pending/` directory (pending_files.py layout)."""
    try:
        return sum(1 for n in os.listdir(directory) if n.endswith(".json") and not n.startswith("."))
    except OSError:
        return 0


def describe_sessions(home: Path) -> list[SessionInfo]:
    """Every session with its title, open state and pending-review count (open ones first)."""
    flocks = held_flocks()
    found: list[SessionInfo] = []
    for sid in session_ids(home):
        directory = home / "sessions" / sid
        meta = _meta(directory)
        is_open, pid = owner_of(directory, flocks)
        found.append(
            SessionInfo(
                session_id=sid,
                title=meta.get("title") if isinstance(meta.get("title"), str) else None,
                cwd=str(meta.get("cwd") or ""),
                open=is_open,
                owner_pid=pid,
                pending_reviews=count_pending(directory / "harness" / "pending"),
                has_harness=(directory / "harness").is_dir(),
            )
        )
    found.sort(key=lambda s: (not s.open, s.session_id))
    return found


def published_quiescence(home: Path) -> dict[str, dict[str, Any]]:
    """`{session id: reading}` of every session, from the `quiescence.json` its server
    keeps (acp_server/sessions/quiescence_file.py), checked against the session's owner lock: a closed
    session or a dead writer is "not running", a bad file "unknown" with the reason."""
    from acp_server.sessions.quiescence_file import read_quiescence

    flocks = held_flocks()
    out: dict[str, dict[str, Any]] = {}
    for sid in session_ids(home):
        directory = home / "sessions" / sid
        is_open, pid = owner_of(directory, flocks)
        out[sid] = read_quiescence(directory, sid, is_open=is_open, owner_pid=pid).to_json()
    return out
