"""Kernel hibernation with real kernels: an idle kernel is snapshotted and stopped, its next cell
revives it with its variables; a running or pinned kernel is never stopped; a variable the snapshot
cannot hold is announced before and reported after; past `max_kernels` the coldest kernel
hibernates instead of the new session waiting. The idle clock is injected (no waiting on time)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from agent_helpers import collect, config_for, of_type

from agent_core import Agent, Session
from agent_core import events as ev
from agent_core.bus import OutsideTurn
from agent_core.ports import NoEditor
from agent_core.testing import ScriptedModelServer, text, tool_call

WAIT = 120.0
MINUTE = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += minutes * MINUTE


def make_agent(tmp_path: Path, server: ScriptedModelServer, **overrides: Any) -> tuple[Agent, Clock]:
    agent = Agent(config_for(tmp_path, server, kernel_idle_minutes=30.0, **overrides))
    clock = Clock()
    agent.hibernator.clock = clock
    agent.hibernator.idle_seconds = 30 * MINUTE  # the config's value, as the agent built it
    return agent, clock


def finished(events: list[ev.TurnEvent]) -> ev.CellFinished:
    cells = of_type(events, ev.CellFinished)
    assert len(cells) == 1, events
    return cells[0]


def card_lines(events: list[ev.TurnEvent]) -> str:
    return "".join(e.text for e in of_type(events, ev.CellOutput))


def test_an_idle_kernel_hibernates_and_its_next_cell_revives_it_with_its_variables(tmp_path: Path) -> None:
    script = [
        tool_call("label = 'n'\nx = 41\nitems = list(range(3))"),
        text("set"),
        tool_call("print(x + 1, items)"),
        text("read"),
        tool_call("print('again')"),
        text("again"),
    ]

    async def scenario(server: ScriptedModelServer) -> tuple[Any, ...]:
        agent, clock = make_agent(tmp_path, server)
        await agent.start()
        try:
            session = await agent.new_session(str(tmp_path), NoEditor())
            await collect(session, "set")
            first = await session.kernel()
            clock.advance(29)
            early = await agent.hibernator.sweep()  # not idle long enough yet
            clock.advance(2)
            swept = await agent.hibernator.sweep()
            status = await session.kernel_status()
            read = await collect(session, "read")
            again = await collect(session, "again")
            live_status = await session.kernel_status()
            return early, swept, session.id, first.alive, status, read, again, live_status
        finally:
            await agent.aclose()

    with ScriptedModelServer(script) as server:
        early, swept, sid, first_alive, status, read, again, live_status = asyncio.run(scenario(server))
    assert early == []
    assert swept == [sid]
    assert first_alive is False  # the kernel process was stopped
    assert status.startswith("hibernated"), status
    assert "idle for 31 min" in status
    cell = finished(read)
    assert cell.status == "completed"
    assert "42 [0, 1, 2]" in (cell.output or "")
    assert card_lines(read).startswith("kernel revived: 3 variables restored\n")  # label, x, items
    assert "kernel revived" not in card_lines(again)  # said once, on the cell that woke it
    assert live_status.startswith("idle") and "hibernates after 30 min idle" in live_status


def test_a_running_or_pinned_kernel_is_never_hibernated(tmp_path: Path) -> None:
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    script = [
        tool_call(f"print('waiting'); print(open({str(fifo)!r}).read())"),
        text("ran"),
        tool_call("y = 2"),
        text("pinned one ran"),
    ]

    async def scenario(server: ScriptedModelServer) -> tuple[Any, ...]:
        agent, clock = make_agent(tmp_path, server)
        await agent.start()
        try:
            running = await agent.new_session(str(tmp_path), NoEditor())
            pinned = await agent.new_session(str(tmp_path), NoEditor())
            await collect(pinned, "pinned")  # the first request of the script is the running one's
            pin_reply = pinned.keep_kernel()
            started = asyncio.Event()

            async def run() -> list[ev.TurnEvent]:
                events = []
                async for event in running.run_turn([ev.TextPart("run")]):
                    events.append(event)
                    if isinstance(event, ev.CellOutput) and "waiting" in event.text:
                        started.set()  # the cell is running (blocked on the fifo)
                return events

            turn = asyncio.create_task(run())
            await asyncio.wait_for(started.wait(), WAIT)
            clock.advance(90)
            swept = await agent.hibernator.sweep()
            refused = await agent.hibernator.hibernate(running, "asked")
            running_status = await running.kernel_status()
            pinned_status = await pinned.kernel_status()
            await asyncio.to_thread(fifo.write_text, "go")
            events = await asyncio.wait_for(turn, WAIT)
            alive = ((await running.kernel()).alive, (await pinned.kernel()).alive)
            return swept, refused, running_status, pinned_status, pin_reply, events, alive
        finally:
            await agent.aclose()

    # Request order: the pinned session's turn first (its cell, its answer), then the running one's.
    with ScriptedModelServer([script[2], script[3], script[0], script[1]]) as server:
        swept, refused, running_status, pinned_status, pin_reply, events, alive = asyncio.run(
            scenario(server)
        )
    assert swept == []
    assert refused == "a turn is running"
    assert running_status.startswith("busy (running cell"), running_status
    assert "not hibernated while a turn is running" in running_status
    assert "pinned with `/kernel keep`" in pinned_status
    assert pin_reply.startswith("Kernel pinned")
    assert "go" in (finished(events).output or "")
    assert alive == (True, True)


def test_an_unrestorable_variable_is_announced_first_and_reported_when_the_kernel_revives(
    tmp_path: Path,
) -> None:
    target = tmp_path / "log.txt"
    script = [
        tool_call(f"handle = open({str(target)!r}, 'w')\ncount = 7"),
        text("opened"),
        tool_call("print(count * 6)"),
        text("read"),
    ]

    async def scenario(server: ScriptedModelServer) -> tuple[Any, ...]:
        agent, clock = make_agent(tmp_path, server)
        await agent.start()
        notices: list[ev.Notice] = []
        try:
            session: Session = await agent.new_session(str(tmp_path), NoEditor())

            async def listen(outside: OutsideTurn) -> None:
                if isinstance(outside.event, ev.Notice):
                    notices.append(outside.event)

            session.bus.subscribe(OutsideTurn, listen)
            await collect(session, "open")
            clock.advance(31)
            first_sweep = await agent.hibernator.sweep()  # told, not stopped
            told_status = await session.kernel_status()
            clock.advance(1)
            too_soon = await agent.hibernator.sweep()  # within the grace the user has to pin it
            clock.advance(agent.hibernator.warn_grace / MINUTE)
            second_sweep = await agent.hibernator.sweep()
            events = await collect(session, "read")
            return first_sweep, told_status, too_soon, second_sweep, session.id, notices, events
        finally:
            await agent.aclose()

    with ScriptedModelServer(script) as server:
        first_sweep, told_status, too_soon, second_sweep, sid, notices, events = asyncio.run(scenario(server))
    assert first_sweep == [] and too_soon == []
    assert second_sweep == [sid]
    assert len(notices) == 1, notices
    assert "handle" in (notices[0].description or "") and "/kernel keep" in (notices[0].description or "")
    assert "cannot restore (handle)" in told_status
    line = card_lines(events).splitlines()[0]
    assert line.startswith("kernel revived: 1 variable restored, 1 not restorable: handle ("), line
    assert "42" in (finished(events).output or "")


def test_past_max_kernels_the_coldest_kernel_hibernates_instead_of_the_new_session_waiting(
    tmp_path: Path,
) -> None:
    routes = {f"[[{name}]]": [tool_call(f"{name} = '{name}-value'"), text("ok")] for name in "ac"}
    routes["[[b]]"] = [tool_call("b = 'b-value'"), text("ok"), tool_call("print(b)"), text("ok")]

    async def scenario(server: ScriptedModelServer) -> tuple[Any, ...]:
        agent, clock = make_agent(tmp_path, server, max_kernels=2)
        await agent.start()
        try:
            a = await agent.new_session(str(tmp_path), NoEditor())
            b = await agent.new_session(str(tmp_path), NoEditor())
            c = await agent.new_session(str(tmp_path), NoEditor())
            await collect(a, "[[a]]")
            a.keep_kernel()  # the coldest, but pinned: b goes instead
            clock.advance(1)
            await collect(b, "[[b]]")
            clock.advance(1)
            c_events = await asyncio.wait_for(collect(c, "[[c]]"), WAIT)  # would wait forever before
            b_status = await b.kernel_status()
            a.keep_kernel(False)
            clock.advance(1)
            b_events = await asyncio.wait_for(collect(b, "again"), WAIT)  # b revives; a (coldest) goes
            a_status = await a.kernel_status()
            return c_events, b_status, b_events, a_status, agent._pool.in_use if agent._pool else None
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        c_events, b_status, b_events, a_status, in_use = asyncio.run(scenario(server))
    assert finished(c_events).status == "completed"
    assert b_status.startswith("hibernated") and "max_kernels=2" in b_status, b_status
    assert card_lines(b_events) == "kernel revived: 1 variable restored\nb-value\n"
    assert a_status.startswith("hibernated"), a_status
    assert in_use == 2


def test_a_kernel_with_a_process_it_started_still_running_is_not_hibernated(tmp_path: Path) -> None:
    script = [
        tool_call("import subprocess\njob = subprocess.Popen(['sleep', '600'])"),
        text("started"),
        tool_call("job.kill()\njob.wait()"),
        text("stopped"),
    ]

    async def scenario(server: ScriptedModelServer) -> tuple[Any, ...]:
        agent, clock = make_agent(tmp_path, server)
        await agent.start()
        try:
            session = await agent.new_session(str(tmp_path), NoEditor())
            await collect(session, "start a background job")
            clock.advance(31)
            held = await agent.hibernator.sweep()
            status = await session.kernel_status()
            await collect(session, "stop it")
            clock.advance(31)
            released = await agent.hibernator.sweep()
            return held, status, released, session.id
        finally:
            await agent.aclose()

    with ScriptedModelServer(script) as server:
        held, status, released, sid = asyncio.run(scenario(server))
    assert held == []
    assert "not hibernated while a process the kernel started is running" in status and "(sleep)" in status
    assert released == [sid]
