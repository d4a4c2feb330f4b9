"""`sessions/<id>/quiescence.json`: a session's quiescence, published for readers in other processes.

Only the server that has a session open knows whether its background work has settled: refinement
jobs queued or running (the coordinator's counters) and children still queued or running (the
subagent hub). A review panel run standalone (`continual-acp harness ui`) is another process, so
the server keeps this file current for it:

* written at bind and after every harness event and child state change that alters the snapshot
  (the events the quiescence notification and its mirror are sent from: harness/events.py,
  subagent_cards.py), and while busy every 250 ms if the counters moved, with the same fields as
  the in-server panel's snapshot (`snapshot`);
* marked `ended` when the session closes (session/close, session/delete, the server's shutdown);
* 0600, written to a temp file and renamed over the old one, so a reader sees a whole file, old or
  new, never a mix. No fsync: it is a live signal, not data — after a crash its writer is dead,
  and the reader says so;
* it names the writing server (`pid`, and on Linux that process's start time, so a reused pid is
  not mistaken for the writer).

The server side (which events rewrite it) is `quiescence_publisher.py`; this module is the file's
format, its writer and its reader. `read_quiescence` is the reader's one defined outcome for any file: `settled` or `busy` from a live
writer that still holds the session; `not running` when the session is closed, the file says it
ended, or its writer has exited (a dead server is never "busy"); `unknown`, with the reason, for a
missing, unreadable, oversized, malformed or hostile file. It never raises.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from host_base.private_files import write_atomic
from host_base.process_identity import pid_exists, start_time

log = logging.getLogger(__name__)

FILE = "quiescence.json"
VERSION = 1
MAX_BYTES = 64 * 1024  # a real file is a few hundred bytes; anything bigger is not ours
MAX_BACKGROUND = 100  # items of the background list a reader keeps
MAX_TEXT = 200  # characters of one background item's field a reader keeps
ITEM_FIELDS = ("type", "id", "title", "sessionId", "name", "state", "parentSessionId")
PID_MAX = 2**22  # Linux's ceiling (pid_max); a larger number is not a pid

SETTLED, BUSY, NOT_RUNNING, UNKNOWN = "settled", "busy", "not running", "unknown"
# POSIX-only open flags (Windows has none of them).
_CLOEXEC, _NONBLOCK, _NOFOLLOW = (getattr(os, n, 0) for n in ("O_CLOEXEC", "O_NONBLOCK", "O_NOFOLLOW"))


def process_start(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot (`host_base`'s `start_time`), or
    None when not readable (another platform, or no such process)."""
    started = start_time(pid)
    return int(started) if started is not None else None


_own: tuple[int, int | None] | None = None


def _own_process() -> tuple[int, int | None]:
    """(pid, start time) of this process, read once per process (a forked child reads its own)."""
    global _own
    pid = os.getpid()
    if _own is None or _own[0] != pid:
        _own = (pid, process_start(pid))
    return _own


def pid_alive(pid: int) -> bool:
    """True when a process `pid` exists (`host_base`'s `pid_exists`, the one check)."""
    return pid_exists(pid)


# ------------------------------------------------------------------ the writer


_IDLE: Mapping[str, Any] = {"quiescent": True, "pending": 0, "in_flight": 0, "background": []}


def write_quiescence(
    session_dir: Path, session_id: str, state: Mapping[str, Any], *, ended: bool = False
) -> None:
    """Replace `session_dir/quiescence.json` atomically (0600) with `state` and this process as
    the writer. Raises OSError (the caller logs it: a missing file only makes a reader say unknown)."""
    pid, started = _own_process()
    body = {
        "version": VERSION,
        "session_id": session_id,
        "pid": pid,
        "pid_start": started,
        "written_at": time.time(),
        "ended": ended,
        "quiescent": bool(state.get("quiescent", True)),
        "pending": int(state.get("pending", 0)),
        "in_flight": int(state.get("in_flight", 0)),
        "background": list(state.get("background", [])),
    }
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    # No fsync: a live signal, rewritten at every change, that nobody must find after a crash.
    # The rename never follows a symlink at the target: the link itself is replaced.
    write_atomic(session_dir / FILE, data, sync=False)


# ------------------------------------------------------------------ the reader


@dataclass(frozen=True)
class QuiescenceReading:
    """What a reader in another process can say about a session's quiescence."""

    state: str  # SETTLED | BUSY | NOT_RUNNING | UNKNOWN
    reason: str | None = None
    quiescent: bool | None = None
    pending: int = 0
    in_flight: int = 0
    background: list[dict[str, Any]] = field(default_factory=list)
    pid: int | None = None
    written_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "reason": self.reason,
            "quiescent": self.quiescent,
            "pending": self.pending,
            "in_flight": self.in_flight,
            "background": self.background,
            "pid": self.pid,
            "written_at": self.written_at,
            "source": "file",
        }


def _count(data: Mapping[str, Any], name: str) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**6:
        raise ValueError(f"{name} is not a count")
    return value


def _items(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise ValueError("background is not a list")
    items: list[dict[str, Any]] = []
    for item in raw[:MAX_BACKGROUND]:
        if not isinstance(item, dict):
            raise ValueError("a background item is not an object")
        kept = {k: item[k][:MAX_TEXT] for k in ITEM_FIELDS if isinstance(item.get(k), str)}
        if "type" not in kept:
            raise ValueError("a background item has no type")
        items.append(kept)
    return items


def _load(path: Path) -> dict[str, Any]:
    """The file's JSON object; ValueError (with the reason) for anything that is not one of ours."""
    try:
        fd = os.open(path, os.O_RDONLY | _CLOEXEC | _NONBLOCK | _NOFOLLOW)
    except OSError as exc:
        raise ValueError(f"cannot open it ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not (info.st_mode & 0o170000) == 0o100000:
            raise ValueError("it is not a regular file")
        if info.st_size > MAX_BYTES:
            raise ValueError(f"it is {info.st_size} bytes (more than {MAX_BYTES})")
        raw = os.read(fd, MAX_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError("it is not valid JSON") from None
    if not isinstance(data, dict):
        raise ValueError("it is not a JSON object")
    return data


def write_ended(session_dir: Path, session_id: str) -> None:
    """Say the session was closed by this process (settled, nothing in flight). Raises OSError."""
    write_quiescence(session_dir, session_id, _IDLE, ended=True)


def read_quiescence(
    session_dir: Path, session_id: str, *, is_open: bool | None, owner_pid: int | None
) -> QuiescenceReading:
    """The quiescence of the session in `session_dir` as its server published it. `is_open` and
    `owner_pid` come from the session's owner lock (panel/sessions.py; None: not knowable here)."""
    path = session_dir / FILE
    if not os.path.lexists(path):
        if is_open is False:
            return QuiescenceReading(NOT_RUNNING, "the session is not open in any server")
        return QuiescenceReading(
            UNKNOWN,
            "no quiescence file: the process that has it open publishes none (a subagent, an older server)",
        )
    try:
        data = _load(path)
        if data.get("version") != VERSION:
            raise ValueError(f"its version is {data.get('version')!r}, not {VERSION}")
        if data.get("session_id") != session_id:
            raise ValueError("it names another session")
        pid, started, written_at = data.get("pid"), data.get("pid_start"), data.get("written_at")
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= PID_MAX:
            raise ValueError("it names no valid pid")
        if started is not None and (isinstance(started, bool) or not isinstance(started, int)):
            raise ValueError("its pid_start is not a number")
        if isinstance(written_at, bool) or not isinstance(written_at, int | float):
            raise ValueError("it has no written_at time")
        ended, quiescent = data.get("ended"), data.get("quiescent")
        if not isinstance(ended, bool) or not isinstance(quiescent, bool):
            raise ValueError("ended and quiescent must be true or false")
        pending, in_flight = _count(data, "pending"), _count(data, "in_flight")
        background = _items(data.get("background"))
    except ValueError as exc:
        return QuiescenceReading(UNKNOWN, f"{FILE} is unusable: {exc}")
    when = float(written_at)
    if ended:
        return QuiescenceReading(
            NOT_RUNNING, f"the session was closed by its server (pid {pid})", pid=pid, written_at=when
        )
    if not pid_alive(pid) or (started is not None and process_start(pid) not in (None, started)):
        return QuiescenceReading(
            NOT_RUNNING, f"the server that wrote it (pid {pid}) has exited", pid=pid, written_at=when
        )
    if is_open is False:
        return QuiescenceReading(
            NOT_RUNNING,
            f"the session is not open (its file from pid {pid} is stale)",
            pid=pid,
            written_at=when,
        )
    if is_open and owner_pid is not None and owner_pid != pid:
        return QuiescenceReading(
            UNKNOWN,
            f"the session is open in pid {owner_pid}, which publishes no quiescence (the file is pid {pid}'s)",
            pid=pid,
            written_at=when,
        )
    return QuiescenceReading(
        SETTLED if quiescent else BUSY,
        None,
        quiescent,
        pending,
        in_flight,
        background,
        pid=pid,
        written_at=when,
    )


__all__ = [
    "BUSY",
    "FILE",
    "NOT_RUNNING",
    "SETTLED",
    "UNKNOWN",
    "QuiescenceReading",
    "read_quiescence",
    "write_quiescence",
]
