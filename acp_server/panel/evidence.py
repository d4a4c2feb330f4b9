"""Evidence quotes: the transcript messages an edit cites, read from the session's transcript.

The transcript is the one the agent writes (`sessions/<id>/transcript.jsonl`); it is folded into
messages with the same function the planner uses (so the ids are the ids the planner cited) and
cached per session until the file changes.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

QUOTE_CHARS = 800


class EvidenceReader:
    """Message-id lookups in session transcripts under one data home."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}

    def _messages(self, session_id: str) -> dict[str, Any]:
        from agent_core.history.transcript import SessionStore

        store = SessionStore(self.home)
        try:
            path = store.transcript_path(session_id)
            info = path.stat()
        except (OSError, ValueError):
            return {}
        key = (info.st_size, info.st_mtime_ns)
        with self._lock:
            cached = self._cache.get(session_id)
            if cached is not None and cached[0] == key:
                return cached[1]
        from agent_core.refinement.trajectory import trajectory_from_events

        try:
            loaded = store.load(session_id)
        except (OSError, ValueError) as exc:
            log.warning("cannot read the transcript of session %s: %s", session_id, exc)
            return {}
        items: dict[str, Any] = {}
        for item in trajectory_from_events(loaded.events):
            # A cell is a call and a result under one id: keep both, call first.
            if item.message_id in items:
                prior = items[item.message_id]
                items[item.message_id] = {**prior, "text": f"{prior['text']}\n→ {item.text}"}
            else:
                items[item.message_id] = {"role": item.role, "text": item.text, "title": item.title}
        with self._lock:
            self._cache[session_id] = (key, items)
        return items

    def quotes(self, session_id: str | None, message_ids: list[str]) -> list[dict[str, Any]]:
        """One quote per cited id: `{message_id, session_id, role?, text?, found}`."""
        messages = self._messages(session_id) if session_id else {}
        out: list[dict[str, Any]] = []
        for message_id in message_ids:
            found = messages.get(message_id)
            quote: dict[str, Any] = {
                "message_id": message_id,
                "session_id": session_id,
                "found": found is not None,
            }
            if found is not None:
                body = str(found["text"])
                if len(body) > QUOTE_CHARS:
                    body = body[:QUOTE_CHARS] + f" … [{len(body) - QUOTE_CHARS} more characters]"
                quote.update(role=found["role"], text=body, title=found.get("title"))
            out.append(quote)
        return out

    def message_ids(self, session_id: str | None) -> set[str]:
        """Every message id of a session's transcript (what apply checks evidence against)."""
        return set(self._messages(session_id)) if session_id else set()

    def transcript(self, session_id: str, limit: int = 200) -> list[dict[str, Any]]:
        """The last `limit` messages of a session, oldest first, each cut to a quote's length."""
        items = list(self._messages(session_id).items())[-limit:]
        return [
            {
                "message_id": mid,
                "role": item["role"],
                "title": item.get("title"),
                "text": item["text"]
                if len(item["text"]) <= QUOTE_CHARS
                else item["text"][:QUOTE_CHARS] + " …",
            }
            for mid, item in items
        ]
