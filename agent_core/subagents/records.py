"""The records subagents speak in: a child's state and link, inbox messages, hub events.

A child is a real session of this server; its `ChildRecord` is the parent/child link plus the
child's lifecycle, persisted as `sessions/<child>/subagent.json` (persistence.py). Records are
mutable (the hub moves them through their states) but only the hub writes them.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

ChildState = Literal[
    "queued", "running", "needs-action", "idle", "finished", "failed", "cancelled", "interrupted"
]
STATES: tuple[str, ...] = (
    "queued",
    "running",
    "needs-action",
    "idle",
    "finished",
    "failed",
    "cancelled",
    "interrupted",
)
# `needs-action` (the name of ACP's subagent proposal): running, but waiting for the user to answer
# a permission request; it keeps its running slot.
ACTIVE: frozenset[str] = frozenset({"queued", "running", "needs-action"})
TURN: frozenset[str] = frozenset({"running", "needs-action"})  # its turn is under way
# `idle`: its turn stopped short of an answer (a limit or truncation); it can be continued in the editor.
DONE: frozenset[str] = frozenset({"idle", "finished", "failed", "cancelled", "interrupted"})

MessageKind = Literal["message", "final"]

ANSWER_LIMIT = 4000  # characters of a final answer carried in the inbox, a card, `observe`


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def bounded(text: str, limit: int = ANSWER_LIMIT) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters; `agents.observe(name)` shows the state)"


@dataclass
class Budget:
    """Per-child limits: tokens (input + output + cache writes; cache reads are not counted) and wall time."""

    tokens: int | None = None
    seconds: float | None = None


@dataclass
class ChildRecord:
    """A subagent as its parent sees it: who, what task, its state and final answer."""

    session_id: str
    parent_id: str
    name: str
    task: str
    depth: int
    state: ChildState = "queued"
    spec: str | None = None
    model: str | None = None
    cwd: str = ""
    reason: str | None = None  # why it failed / was cancelled / was interrupted
    answer: str | None = None  # the final answer (bounded)
    stop_reason: str | None = None
    messages_sent: int = 0  # messages the child sent with `agents.send`
    final_read: bool = (
        False  # the parent has taken the final message (else it is delivered again after a restart)
    )
    tokens_used: int = 0
    cells_run: int = 0
    budget: Budget = field(default_factory=Budget)
    created_at: str = field(default_factory=now_iso)
    started_at: str | None = None
    ended_at: str | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> ChildRecord:
        """A record read from disk; ValueError when it is not one."""
        if not isinstance(data, dict):
            raise ValueError("a subagent record must be a JSON object")
        try:
            budget = data.get("budget") or {}
            record = cls(
                session_id=str(data["session_id"]),
                parent_id=str(data["parent_id"]),
                name=str(data["name"]),
                task=str(data.get("task", "")),
                depth=int(data.get("depth", 1)),
                state=data.get("state", "interrupted"),
                spec=data.get("spec"),
                model=data.get("model"),
                cwd=str(data.get("cwd", "")),
                reason=data.get("reason"),
                answer=data.get("answer"),
                stop_reason=data.get("stop_reason"),
                messages_sent=int(data.get("messages_sent", 0)),
                final_read=bool(data.get("final_read", False)),
                tokens_used=int(data.get("tokens_used", 0)),
                cells_run=int(data.get("cells_run", 0)),
                budget=Budget(budget.get("tokens"), budget.get("seconds")),
                created_at=str(data.get("created_at") or now_iso()),
                started_at=data.get("started_at"),
                ended_at=data.get("ended_at"),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed subagent record: {exc!r}") from None
        if record.state not in STATES:
            raise ValueError(f"unknown subagent state {record.state!r}")
        return record

    def summary(self) -> dict[str, Any]:
        """What `agents.list()` shows for one child (no trajectory)."""
        body: dict[str, Any] = {
            "name": self.name,
            "session_id": self.session_id,
            "state": self.state,
            "task": bounded(self.task, 200),
            "depth": self.depth,
        }
        for key in ("spec", "model", "reason", "stop_reason"):
            value = getattr(self, key)
            if value:
                body[key] = value
        if self.answer is not None:
            body["answer"] = bounded(self.answer, 500)
        body["messages_sent"] = self.messages_sent
        return body


_message_ids = itertools.count(1)


@dataclass(frozen=True)
class Message:
    """One inbox message. `kind == "final"`: a child's turn ended (answer, failure or cancel)."""

    sender: str  # "parent" or the sending child's name
    sender_session: str
    to_session: str
    text: str
    kind: MessageKind = "message"
    state: str | None = None  # for finals: the child's state (finished, failed, cancelled, ...)
    sent_messages: bool = False  # for finals: whether the child also sent messages before
    id: str = field(default_factory=lambda: f"m{next(_message_ids)}-{int(time.time() * 1000)}")
    created_at: str = field(default_factory=now_iso)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "from": self.sender,
            "kind": self.kind,
            "text": self.text,
            "created_at": self.created_at,
        }
        if self.kind == "final":
            body["final"] = True
            body["state"] = self.state
            body["sent_messages"] = self.sent_messages
        return body


@dataclass(frozen=True)
class ChildChanged:
    """Hub event: a child was admitted or changed state (cards in the editor follow these)."""

    record: ChildRecord
    state: ChildState


class SubagentError(ValueError):
    """A spawn/send/cancel the hub refuses; the message says what to change."""


def final_message(record: ChildRecord) -> Message:
    """What an ended child's parent finds in its inbox, marked final: the answer, or why it stopped
    (and its last words), and whether it also sent messages."""
    if record.state == "finished":
        text = record.answer or "(the child ended without a written answer)"
    elif record.state == "idle":
        text = f"{record.reason}. Its last words: {record.answer or '(none)'}"
    else:
        text = f"{record.state}: {record.reason or 'no reason given'}"
        if record.answer:
            text += f". Its last words: {record.answer}"
    return Message(
        sender=record.name,
        sender_session=record.session_id,
        to_session=record.parent_id,
        text=text,
        kind="final",
        state=record.state,
        sent_messages=record.messages_sent > 0,
    )
