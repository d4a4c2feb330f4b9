"""The files a new session starts with: its transcript's header line and its `meta.json`.

One definition for `SessionStore.create` and for `fresh_session.reserve`, which writes them before
the session store's module (and the turn events it imports) is loaded: light on purpose.
"""

from __future__ import annotations

from datetime import UTC, datetime

FORMAT_VERSION = 1
TRANSCRIPT = "transcript.jsonl"
META = "meta.json"


def iso(moment: datetime) -> str:
    """A moment as the session files write it (UTC, milliseconds, `Z`)."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    return iso(datetime.now(UTC))


def header_record(session_id: str, cwd: str, created_at: str) -> dict[str, object]:
    """The transcript's first record."""
    return {
        "type": "header",
        "version": FORMAT_VERSION,
        "session_id": session_id,
        "cwd": cwd,
        "created_at": created_at,
    }


def meta_record(
    session_id: str, *, cwd: str, title: str | None, created_at: str, updated_at: str
) -> dict[str, object]:
    """`meta.json`'s content (what `session/list` shows without reading the transcript)."""
    return {
        "session_id": session_id,
        "cwd": cwd,
        "title": title,
        "created_at": created_at,
        "updated_at": updated_at,
    }
