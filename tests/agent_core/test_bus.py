"""The event bus: handlers run in subscription order, one failing handler never stops the others,
unsubscribing stops the calls, and each handler sees only its own event type."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import pytest

from agent_core.bus import EventBus

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Ping:
    n: int


@dataclass(frozen=True)
class LoudPing(Ping):
    pass


def test_emit_runs_handlers_in_subscription_order_and_a_failing_one_does_not_stop_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus("session s1")
    calls: list[str] = []

    def broken(ping: Ping) -> None:
        calls.append("broken")
        raise RuntimeError("handler bug")

    bus.subscribe(Ping, lambda ping: calls.append(f"first {ping.n}"))
    bus.subscribe(Ping, broken)
    bus.subscribe(Ping, lambda ping: calls.append(f"last {ping.n}"))
    with caplog.at_level(logging.ERROR, logger="agent_core.bus"):
        bus.emit(Ping(1))
    assert calls == ["first 1", "broken", "last 1"]
    assert "Ping handler" in caplog.text and "in session s1" in caplog.text


async def test_publish_awaits_each_handler_in_order_and_isolates_failures_and_timeouts() -> None:
    bus = EventBus()
    calls: list[str] = []

    async def slow(ping: Ping) -> None:
        calls.append("slow started")
        await asyncio.Event().wait()  # never set: only the timeout ends it

    async def broken(ping: Ping) -> None:
        raise RuntimeError("handler bug")

    async def last(ping: Ping) -> None:
        calls.append(f"last {ping.n}")

    bus.subscribe(Ping, slow)
    bus.subscribe(Ping, broken)
    bus.subscribe(Ping, lambda ping: calls.append("sync"))
    bus.subscribe(Ping, last)
    await bus.publish(Ping(2), timeout=0.05)
    assert calls == ["slow started", "sync", "last 2"]


def test_unsubscribing_by_subscription_or_by_value_stops_the_calls() -> None:
    bus = EventBus()
    calls: list[str] = []

    def by_value(ping: Ping) -> None:
        calls.append("by value")

    subscription = bus.subscribe(Ping, lambda ping: calls.append("by subscription"))
    bus.subscribe(Ping, by_value)
    bus.subscribe(Ping, lambda ping: calls.append("stays"))
    subscription.cancel()
    subscription.cancel()  # idempotent
    bus.unsubscribe(Ping, by_value)
    bus.emit(Ping(3))
    assert calls == ["stays"]


def test_a_handler_sees_only_its_exact_event_type() -> None:
    bus = EventBus()
    seen: list[object] = []
    bus.subscribe(Ping, seen.append)
    bus.emit(LoudPing(4))
    bus.emit("not a ping")
    assert seen == []


def test_an_async_handler_of_an_emitted_event_is_reported_and_never_left_pending(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    ran: list[int] = []

    async def handler(ping: Ping) -> None:
        ran.append(ping.n)

    bus.subscribe(Ping, handler)
    bus.subscribe(Ping, lambda ping: ran.append(-ping.n))
    with caplog.at_level(logging.ERROR, logger="agent_core.bus"):
        bus.emit(Ping(5))
    assert ran == [-5]
    assert "is async; this event is emitted synchronously" in caplog.text
