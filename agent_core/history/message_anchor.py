"""Which prompt a client means by `beforeMessage`: its message id, or its text's fingerprint.

The rewind shape other ACP agents speak (`_session/rewind {beforeMessage: {messageId,
messageFingerprint?, messageOccurrence?}}`) names a user message the way the client saw it: by the
id it was shown with, pinned by `"sha256:" + hex SHA-256` of the message's text (its text blocks
joined by newlines), and told apart from equal texts by a 1-based occurrence. An id whose text does
not match the given fingerprint is a miss: a reused id must never select another message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from agent_core import events as ev

__all__ = ["PromptMessage", "fingerprint", "prompt_anchor", "prompt_messages", "resolve_before_message"]


@dataclass(frozen=True, slots=True)
class PromptMessage:
    message_id: str
    text: str

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.text)


def fingerprint(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def prompt_messages(events: Iterable[ev.TurnEvent], prompt_ids: Iterable[str]) -> list[PromptMessage]:
    """The user messages that opened the prompts `prompt_ids` (steering messages are not prompts),
    in transcript order."""
    wanted = set(prompt_ids)
    found: list[PromptMessage] = []
    for event in events:
        if isinstance(event, ev.UserMessage) and event.message_id in wanted:
            text = "\n".join(p.text for p in event.parts if isinstance(p, ev.TextPart))
            found.append(PromptMessage(event.message_id, text))
    return found


def resolve_before_message(
    messages: Sequence[PromptMessage], message_id: str, message_fingerprint: str | None, occurrence: int
) -> str | None:
    """The message id the anchor selects, or None when it selects none."""
    exact = next((m for m in messages if m.message_id == message_id), None)
    if exact is not None and (message_fingerprint is None or exact.fingerprint == message_fingerprint):
        return exact.message_id
    if message_fingerprint is None:
        return None
    matches = [m for m in messages if m.fingerprint == message_fingerprint]
    return matches[occurrence - 1].message_id if 0 < occurrence <= len(matches) else None


class _Entry(Protocol):
    @property
    def message_id(self) -> str | None: ...


class _Index(Protocol):
    @property
    def entries(self) -> Sequence[_Entry]: ...


class _Checkpoints(Protocol):
    @property
    def index(self) -> _Index: ...


class _Transcripts(Protocol):
    def iter_events(self, session_id: str, lines: int | None = None) -> Iterator[ev.TurnEvent]: ...


class AnchoredSession(Protocol):
    """What the resolution reads of a session: its prompt checkpoints and its transcript."""

    @property
    def id(self) -> str: ...

    @property
    def checkpoints(self) -> _Checkpoints: ...

    @property
    def store(self) -> _Transcripts: ...


def prompt_anchor(
    session: AnchoredSession, message_id: str, message_fingerprint: str | None, occurrence: int = 1
) -> str | None:
    """The id of the prompt (one a rewind can go back to) that the anchor names, or None."""
    ids = [e.message_id for e in session.checkpoints.index.entries if e.message_id]
    if message_fingerprint is None:
        return message_id if message_id in ids else None
    messages = prompt_messages(session.store.iter_events(session.id), ids)
    return resolve_before_message(messages, message_id, message_fingerprint, occurrence)
