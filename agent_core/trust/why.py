"""`/why <entry-id>`: the refinements that wrote an entry and the conversation they cite.

`why` walks the histories of the stores it is given (scope label -> store: local, project,
global, or other sessions' local stores), collects every applied edit of the entry, says who let it
in (written by a user, imported from the CLI, approved in review `<id>`, rejected in review, or not
reviewed yet), and quotes the transcript messages each edit cites as evidence — read from
`<home>/sessions/<sid>/transcript.jsonl` through `SessionStore`, with the session and when it
started. A transcript that was deleted, or a message no longer in it, is said, never skipped.

`render_why` is the `/why` text; `WhyAnswer.to_json()` is the `_harness/why` payload for panels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agent_core.history.transcript import SessionStore
from agent_core.refinement.trajectory import TrajectoryItem, trajectory_from_events
from harness_store import HarnessEntry, RefinementResult

QUOTE_CHARS = 400


@dataclass(frozen=True)
class Quote:
    """One cited message: its text with session and time, or why it cannot be quoted."""

    message_id: str
    session_id: str | None
    role: str | None = None
    text: str | None = None
    session_started: str | None = None
    missing: str | None = None


@dataclass(frozen=True)
class Writer:
    """One refinement that wrote the entry."""

    refinement_id: str
    scope: str
    action: str
    trigger: str
    created_at: str
    summary: str
    trust: str | None  # the entry's trust after this write (None: deleted)
    approved_by: str
    session_id: str | None
    reason: str | None
    quotes: tuple[Quote, ...]


@dataclass(frozen=True)
class WhyAnswer:
    """Everything `/why` knows about one entry id."""

    entry_id: str
    current: tuple[tuple[str, HarnessEntry], ...]  # (scope label, entry) where it exists now
    writers: tuple[Writer, ...]

    def to_json(self) -> dict[str, Any]:
        """The `_harness/why` payload."""
        return {
            "entryId": self.entry_id,
            "current": [
                {"scope": scope, "entry": entry.model_dump(mode="json")} for scope, entry in self.current
            ],
            "writers": [asdict(w) for w in self.writers],
        }


class _Transcripts:
    """Transcripts read once each; None for a session whose transcript is gone."""

    def __init__(self, sessions: SessionStore | None) -> None:
        self.sessions = sessions
        self._cache: dict[str, tuple[str | None, dict[str, TrajectoryItem]] | None] = {}

    def get(self, session_id: str) -> tuple[str | None, dict[str, TrajectoryItem]] | None:
        if session_id not in self._cache:
            loaded: tuple[str | None, dict[str, TrajectoryItem]] | None = None
            if self.sessions is not None and self.sessions.exists(session_id):
                try:
                    transcript = self.sessions.load(session_id)
                except (OSError, ValueError):
                    transcript = None
                if transcript is not None:
                    items = trajectory_from_events(transcript.events)
                    loaded = (transcript.created_at or None, {item.message_id: item for item in items})
            self._cache[session_id] = loaded
        return self._cache[session_id]


def _quote(message_id: str, session_id: str | None, transcripts: _Transcripts) -> Quote:
    if session_id is None:
        return Quote(message_id, None, missing="the refinement names no session, so there is no transcript")
    found = transcripts.get(session_id)
    if found is None:
        return Quote(message_id, session_id, missing=f"the transcript of session {session_id} was deleted")
    started, items = found
    item = items.get(message_id)
    if item is None:
        return Quote(
            message_id,
            session_id,
            session_started=started,
            missing=f"message {message_id} is not in the transcript of session {session_id}",
        )
    text = " ".join(item.text.split())
    if len(text) > QUOTE_CHARS:
        text = text[: QUOTE_CHARS - 1] + "…"
    return Quote(message_id, session_id, item.role, text, started)


def _approval(
    record: RefinementResult, reviews: dict[str, list[RefinementResult]], kind: str, entry_id: str
) -> str:
    if record.trigger == "user":
        return "a user (written or approved directly)"
    if record.trigger == "cli":
        return "a user (imported with the continual-acp CLI)"
    if record.trigger == "rollback":
        return f"a rollback of {record.rollback_of}" if record.rollback_of else "a rollback"
    for review in reviews.get(record.id, []):
        for edit in review.applied_edits:
            if edit.applied and edit.kind == kind and edit.id == entry_id and edit.after is not None:
                if edit.after.trust == "verified":
                    return f"a user, approved in review {review.id} ({review.created_at})"
                if edit.after.trust == "rejected":
                    return f"nobody: rejected in review {review.id} ({review.created_at})"
    return "nobody yet: not reviewed (candidate)"


def why(
    entry_id: str,
    *,
    stores: Sequence[tuple[str, Any]],
    sessions: SessionStore | None,
    kind: str | None = None,
) -> WhyAnswer:
    """Who wrote `entry_id` (optionally of one `kind`) in `stores`, oldest first, with quoted evidence."""
    transcripts = _Transcripts(sessions)
    current: list[tuple[str, HarnessEntry]] = []
    writers: list[Writer] = []
    for label, store in stores:
        state = store.load()
        current += [(label, e) for e in state.find(entry_id) if kind is None or e.kind == kind]
        records = list(store.history())
        reviews: dict[str, list[RefinementResult]] = {}
        for record in records:
            if record.review_of is not None:
                reviews.setdefault(record.review_of, []).append(record)
        for record in records:
            for edit in record.applied_edits:
                if not edit.applied or edit.id != entry_id or (kind is not None and edit.kind != kind):
                    continue
                if record.review_of is not None:
                    continue  # a review decision is reported as the approval of what it reviewed
                cited = list(edit.evidence or (edit.after.evidence if edit.after is not None else []))
                writers.append(
                    Writer(
                        refinement_id=record.id,
                        scope=record.scope,
                        action=edit.action,
                        trigger=record.trigger,
                        created_at=record.created_at,
                        summary=record.summary,
                        trust=edit.after.trust if edit.after is not None else None,
                        approved_by=_approval(record, reviews, edit.kind, entry_id),
                        session_id=record.session_id,
                        reason=edit.reason,
                        quotes=tuple(_quote(m, record.session_id, transcripts) for m in cited),
                    )
                )
    writers.sort(key=lambda w: (w.created_at, w.refinement_id))
    return WhyAnswer(entry_id, tuple(current), tuple(writers))


def render_why(answer: WhyAnswer) -> str:
    """The `/why` reply (markdown)."""
    if not answer.writers and not answer.current:
        return f"No harness entry or refinement mentions `{answer.entry_id}`."
    lines = [f"## Why `{answer.entry_id}`"]
    if answer.current:
        for scope, entry in answer.current:
            lines.append(
                f"Now: {entry.kind} in the {scope} harness, {entry.trust}, v{entry.version}: {entry.title}"
            )
    else:
        lines.append("Now: not in any harness (deleted).")
    for writer in answer.writers:
        trust = f", {writer.trust}" if writer.trust else ""
        where = f", session {writer.session_id}" if writer.session_id else ""
        lines.append("")
        lines.append(
            f"- **{writer.action}** by refinement `{writer.refinement_id}` ({writer.scope}, {writer.trigger}"
            f"{trust}{where}, {writer.created_at}): {writer.summary}"
        )
        lines.append(f"  Let in by: {writer.approved_by}.")
        if writer.reason:
            lines.append(f"  Reason: {writer.reason}")
        if not writer.quotes:
            lines.append("  Evidence: none cited.")
        for quote in writer.quotes:
            if quote.text is not None:
                started = f", session started {quote.session_started}" if quote.session_started else ""
                lines.append(
                    f"  Evidence `{quote.message_id}` ({quote.role}, session {quote.session_id}{started}):"
                )
                lines.append(f"  > {quote.text}")
            else:
                lines.append(f"  Evidence `{quote.message_id}`: {quote.missing}.")
    return "\n".join(lines)
