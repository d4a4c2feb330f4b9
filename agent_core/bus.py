"""One typed event bus: what a session (or a feature) tells whoever subscribed.

`EventBus.subscribe(KernelReady, handler)` registers a handler for one event type (the exact class:
no subclass matching, so a handler never sees an event it was not written for) and returns the
`Subscription` that `cancel()`s it; `unsubscribe(kind, handler)` does the same by value. Handlers of
one type run in subscription order; one that raises is logged and the next still runs, so a broken
feature never stops the others or the session. `emit` is for synchronous moments (a kernel is ready,
a turn raised): its handlers must not be coroutines. `publish` awaits each handler in turn (each
bounded by `timeout` when given), so an `await publish(...)` returns once every handler finished.

The session's events are the dataclasses below; features publish their own types on the same bus.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agent_core import events as ev

if TYPE_CHECKING:
    from agent_core.turn.loop import TurnOutcome
    from kernel_bridge import KernelSession

log = logging.getLogger(__name__)

E = TypeVar("E")
Handler = Callable[[E], "Awaitable[None] | None"]


class Subscription(Generic[E]):
    """One handler on one bus; `cancel()` removes it (idempotent)."""

    def __init__(self, bus: EventBus, kind: type[E], handler: Handler[E]) -> None:
        self.bus, self.kind, self.handler = bus, kind, handler

    def cancel(self) -> None:
        self.bus.unsubscribe(self.kind, self.handler)


class EventBus:
    def __init__(self, label: str = "") -> None:
        self.label = label  # said in the log when a handler fails (e.g. the session id)
        self._handlers: dict[type[Any], list[Handler[Any]]] = {}

    def subscribe(self, kind: type[E], handler: Handler[E]) -> Subscription[E]:
        self._handlers.setdefault(kind, []).append(handler)
        return Subscription(self, kind, handler)

    def unsubscribe(self, kind: type[E], handler: Handler[E]) -> None:
        """Remove `handler` (its first subscription to `kind`); unknown handlers are ignored."""
        handlers = self._handlers.get(kind, [])
        if handler in handlers:
            handlers.remove(handler)

    def handlers(self, kind: type[E]) -> list[Handler[E]]:
        """The handlers of `kind`, in the order they run (a copy)."""
        return list(self._handlers.get(kind, []))

    def emit(self, event: object) -> None:
        """Run the handlers of `type(event)` now, in order; a failing one is logged, the rest run."""
        for handler in self.handlers(type(event)):
            try:
                result = handler(event)
            except Exception:
                log.exception("%s handler %r failed%s", type(event).__name__, handler, self._where())
                continue
            if inspect.isawaitable(result):
                # A coroutine here would never run: say so instead of leaving it un-awaited.
                close = getattr(result, "close", None)
                if close is not None:
                    close()
                log.error(
                    "%s handler %r is async; this event is emitted synchronously",
                    type(event).__name__,
                    handler,
                )

    async def publish(self, event: object, *, timeout: float | None = None) -> None:
        """Run and await the handlers of `type(event)`, one after the other; a failing (or, with
        `timeout`, a too slow) one is logged and the rest still run."""
        for handler in self.handlers(type(event)):
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    await (asyncio.wait_for(result, timeout) if timeout is not None else result)
            except Exception:
                log.exception("%s handler %r failed%s", type(event).__name__, handler, self._where())

    def _where(self) -> str:
        return f" in {self.label}" if self.label else ""


# ------------------------------------------------------------------ the session's (and agent's) events


@dataclass(frozen=True)
class KernelReady:
    """A kernel was acquired for the session, before any model cell runs in it (register host ops)."""

    kernel: KernelSession


@dataclass(frozen=True)
class Compacted:
    """The session's model context was just compacted."""


@dataclass
class TurnFinished:
    """A turn ended (any stop reason), before `TurnEnded` is shown: the events a handler adds are
    part of the turn. A handler should compute first and `add` last, so one that fails adds nothing."""

    outcome: TurnOutcome
    events: list[ev.TurnEvent] = field(default_factory=list)

    def add(self, *events: ev.TurnEvent) -> None:
        self.events.extend(events)


@dataclass(frozen=True)
class TurnFailed:
    """A turn raised (a model failure): no `TurnFinished` is published for it, so anything waiting
    for the end of the turn must let go here."""


@dataclass(frozen=True)
class Closing:
    """The session is closing (published before its kernel stops; each handler gets 10 s)."""


@dataclass(frozen=True)
class OutsideTurn:
    """An event that happened outside a turn (`notify_user`, `/compact`, a background refinement):
    the editor connection presents it."""

    event: ev.TurnEvent


@dataclass(frozen=True)
class ShuttingDown:
    """The agent is closing: published (awaited) before its sessions close (the subagent hub stops
    admitting children here)."""


@dataclass(frozen=True)
class AutonomousCheckpoint:
    """The autonomous loop reached a checkpoint (refinement may queue an automatic review)."""

    reason: str
