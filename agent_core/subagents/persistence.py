"""Parent/child links on disk: `sessions/<child>/subagent.json` holds the child's `ChildRecord`.

Written atomically (temp file, fsync, rename; 0600) on every state change, so a restart finds the
last state. A reader never throws on a damaged file: it is skipped with a warning. After a restart
a child that was queued or running is `interrupted` ("interrupted by restart"); it is never
restarted by itself.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from agent_core.subagents.records import ChildRecord, now_iso

log = logging.getLogger(__name__)

FILE = "subagent.json"
INTERRUPTED_BY_RESTART = (
    "interrupted by restart: the server stopped while it was {state}; it is not restarted by itself"
)


def path_of(session_dir: Path) -> Path:
    return session_dir / FILE


def save(session_dir: Path, record: ChildRecord) -> None:
    """Write the record atomically (the session dir exists: the child's transcript made it)."""
    target = path_of(session_dir)
    data = json.dumps(record.to_json(), indent=1, ensure_ascii=False).encode("utf-8")
    from host_base.private_files import write_atomic  # off the startup path

    write_atomic(target, data)


def load(session_dir: Path) -> ChildRecord | None:
    """The record of a child session, or None (not a child, or an unreadable file: logged)."""
    target = path_of(session_dir)
    try:
        raw = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", target, exc)
        return None
    try:
        return ChildRecord.from_json(json.loads(raw))
    except ValueError as exc:
        log.warning("ignoring %s: %s", target, exc)
        return None


def after_restart(record: ChildRecord) -> bool:
    """Mark a record found on disk in a fresh process: queued/running/needs-action -> interrupted. True if changed."""
    if not record.active:
        return False
    record.reason = INTERRUPTED_BY_RESTART.format(state=record.state)
    record.state = "interrupted"
    record.ended_at = now_iso()
    return True


def scan(sessions_root: Path) -> list[ChildRecord]:
    """Every child record under `sessions/` (one directory scan; unreadable files are skipped)."""
    found: list[ChildRecord] = []
    try:
        entries = list(os.scandir(sessions_root))
    except FileNotFoundError:
        return found
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and os.path.exists(os.path.join(entry.path, FILE)):
            record = load(Path(entry.path))
            if record is not None:
                found.append(record)
    return found
