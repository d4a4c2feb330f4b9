"""Drives one child's turn in the background and says how it ended.

The child's turn runs through `Session.run_turn` like any prompt. Budgets are enforced here: tokens
(input + output + cache writes, counted from the child's usage reports) and wall time; a budget that
runs out, a kernel that dies under a cell, or a model failure ends the child as `failed` with the
reason (its turn is cancelled; the parent is not touched). The last few cells and messages are kept
for `agents.observe` -- a bounded summary, never the whole trajectory.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_core import events as ev
from agent_core.errors import ModelError
from agent_core.subagents.records import ChildRecord, bounded
from agent_core.subagents.session_port import SubagentSession

log = logging.getLogger(__name__)

KEEP_CELLS = 5
KEEP_MESSAGES = 5


@dataclass
class Activity:
    """What `observe` shows of a child: its last cells and messages (bounded)."""

    cells: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=KEEP_CELLS))
    messages: deque[str] = field(default_factory=lambda: deque(maxlen=KEEP_MESSAGES))
    _text: dict[str, str] = field(default_factory=dict)
    _titles: dict[str, str] = field(default_factory=dict)

    def see(self, event: object) -> None:
        if isinstance(event, ev.MessageChunk):
            if event.message_id not in self._text:
                self._flush_text()
            self._text[event.message_id] = self._text.get(event.message_id, "") + event.text
        elif isinstance(event, ev.CellStarted):
            self._flush_text()
            self._titles[event.cell_id] = event.title
            self.cells.append({"id": event.cell_id, "title": event.title, "status": "running"})
        elif isinstance(event, ev.CellFinished):
            for cell in self.cells:
                if cell["id"] == event.cell_id:
                    cell["status"] = event.status
                    if event.error:
                        cell["error"] = bounded(event.error, 300)
                    cell["output"] = bounded(event.output, 300)
        elif isinstance(event, ev.TurnEnded):
            self._flush_text()

    def _flush_text(self) -> None:
        for text in self._text.values():
            if text.strip():
                self.messages.append(bounded(text.strip(), 500))
        self._text.clear()

    def last_text(self) -> str | None:
        self._flush_text()
        return self.messages[-1] if self.messages else None


@dataclass
class Ending:
    """How a child's turn ended: the state the hub records and the text delivered to the parent."""

    state: str
    answer: str | None = None
    reason: str | None = None
    stop_reason: str | None = None


def _tokens(totals: Any) -> int:
    """Tokens a budget counts: cache reads are deliberately left out (they repeat the same context)."""
    return int(totals.input_tokens) + int(totals.output_tokens) + int(totals.cache_write_tokens)


def final_answer(session: SubagentSession, activity: Activity) -> str | None:
    """The child's last assistant message without tool calls (its answer), else its last text."""
    for message in reversed(session.messages):
        if message.get("role") == "user":
            break
        if message.get("role") == "assistant" and not message.get("tool_calls"):
            content = message.get("content")
            if isinstance(content, str) and content.strip():
                return content.strip()
    return activity.last_text()


async def drive(
    session: SubagentSession,
    parts: Sequence[ev.PromptPart],
    record: ChildRecord,
    activity: Activity,
    *,
    cancel_reason: Callable[[], str | None],
    stopping: Callable[[], bool],
    on_event: Callable[[object], Awaitable[None] | None] = lambda event: None,
) -> Ending:
    """Run the child's turn to its end; never raises (a failure is an `Ending("failed", ...)`).

    `cancel_reason()` is the reason the hub cancelled the child (None when it did not); `stopping()`
    is true while the server shuts down (the child is then interrupted, not cancelled).
    """
    early = cancel_reason()
    if early is not None:
        # Cancelled between admission and this task's first step: the turn never starts (a cancel
        # before `run_turn` is called would not reach it).
        return Ending("cancelled", reason=early, stop_reason="cancelled")
    failure: str | None = None
    loop = asyncio.get_running_loop()
    canceller: set[asyncio.Task[None]] = set()

    def fail(reason: str) -> None:
        nonlocal failure
        if failure is None:
            failure = reason
            task = loop.create_task(session.cancel())
            canceller.add(task)
            task.add_done_callback(canceller.discard)

    timer = None
    if record.budget.seconds:
        seconds = record.budget.seconds
        timer = loop.call_later(
            seconds, fail, f"wall-time budget exhausted: still running after {seconds:g} s"
        )
    baseline = _tokens(session.usage_totals)
    stop: ev.TurnEnded | None = None
    try:
        async for event in session.run_turn(parts):
            activity.see(event)
            try:
                forwarded = on_event(event)
                if forwarded is not None:
                    await forwarded
            except Exception:
                log.exception("subagent %s: forwarding %s failed", record.name, type(event).__name__)
            if isinstance(event, ev.UsageReport):
                record.tokens_used = _tokens(event) - baseline
                limit = record.budget.tokens
                if limit is not None and record.tokens_used > limit:
                    fail(f"token budget exhausted: {record.tokens_used:,} tokens used of {limit:,}")
            elif isinstance(event, ev.CellStarted):
                record.cells_run += 1
            elif isinstance(event, ev.CellFinished):
                if event.status == "failed" and (event.error or "").startswith("kernel died"):
                    title = activity._titles.get(event.cell_id, event.cell_id)
                    fail(f"its kernel died while running the cell {title!r} ({event.error})")
            elif isinstance(event, ev.TurnEnded):
                stop = event
    except ModelError as exc:
        failure = failure or f"model failure: {exc.message}"
    except Exception as exc:  # a child's fault never reaches the parent as an exception
        log.exception("subagent %s (%s) failed", record.name, record.session_id)
        failure = failure or f"{type(exc).__name__}: {exc}"
    finally:
        if timer is not None:
            timer.cancel()
        for task in list(canceller):
            await asyncio.wait({task}, timeout=2)
    if failure is not None:
        return Ending("failed", reason=failure, answer=final_answer(session, activity), stop_reason="failed")
    reason = cancel_reason()
    if reason is not None:
        return Ending(
            "cancelled", reason=reason, answer=final_answer(session, activity), stop_reason="cancelled"
        )
    if stopping():
        return Ending("interrupted", reason="the server stopped while it was running")
    stop_reason = stop.stop_reason if stop is not None else "cancelled"
    if stop_reason == "end_turn":
        return Ending("finished", answer=final_answer(session, activity), stop_reason=stop_reason)
    if stop_reason == "cancelled":
        return Ending("cancelled", reason="its turn was cancelled (from the editor)", stop_reason=stop_reason)
    message = stop.message if stop is not None else None
    return Ending(
        "idle",
        answer=final_answer(session, activity),
        reason=f"stopped before finishing ({stop_reason}){': ' + message if message else ''}",
        stop_reason=stop_reason,
    )
