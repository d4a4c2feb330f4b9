"""The seams refinement and autonomous mode attach to: on_session, kernel, after-turn, compaction, close."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_helpers import collect, config_for, of_type

from agent_core import Agent, Session
from agent_core import events as ev
from agent_core.bus import Closing, Compacted, KernelReady, TurnFinished
from agent_core.ports import NoEditor
from agent_core.testing import ScriptedModelServer, text, tool_call

pytestmark = pytest.mark.anyio


async def test_hooks_attached_on_session_see_the_kernel_the_turn_compaction_and_close(tmp_path: Path) -> None:
    seen: dict[str, Any] = {"outcomes": [], "compactions": 0, "closed": 0, "ops": []}

    def attach(session: Session) -> None:
        async def echo(args: dict[str, Any]) -> dict[str, Any]:
            seen["ops"].append(args)
            return {"echo": args.get("value")}

        async def after_turn(finished: TurnFinished) -> None:
            seen["outcomes"].append(finished.outcome.stop_reason)
            finished.add(ev.RefinementReported("ref_1", "noted", "local"))

        async def on_close(_: Closing) -> None:
            seen["closed"] += 1

        session.bus.subscribe(KernelReady, lambda ready: ready.kernel.host_bridge.register("test.echo", echo))
        session.bus.subscribe(TurnFinished, after_turn)
        session.bus.subscribe(Compacted, lambda _: seen.__setitem__("compactions", seen["compactions"] + 1))
        session.bus.subscribe(Closing, on_close)

    code = "from kernel_bridge import hostclient as bridge\nprint(bridge.call('test.echo', value=7))"

    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        agent = Agent(config_for(tmp_path, server, keep_recent_turns=1), on_session=attach)
        await agent.start()
        try:
            session = await agent.new_session(str(tmp_path), NoEditor())
            events = await collect(session, "call the host")
            await collect(session, "again")
            await session.compact()
            return events
        finally:
            await agent.aclose()

    with ScriptedModelServer([tool_call(code), text("done"), text("two"), text("summary")]) as server:
        events = await scenario(server)
    assert of_type(events, ev.CellOutput)[0].text == "{'echo': 7}\n"
    assert seen["ops"] == [{"value": 7}]
    names = [type(e).__name__ for e in events]
    assert names[-2:] == ["RefinementReported", "TurnEnded"]
    assert seen["outcomes"] == ["end_turn", "end_turn"]
    assert seen["compactions"] == 1 and seen["closed"] == 1


async def test_a_failing_after_turn_hook_does_not_break_the_turn(tmp_path: Path) -> None:
    async def broken(finished: TurnFinished) -> None:
        raise RuntimeError("hook bug")

    async def scenario(server: ScriptedModelServer) -> list[ev.TurnEvent]:
        agent = Agent(
            config_for(tmp_path, server), on_session=lambda s: s.bus.subscribe(TurnFinished, broken)
        )
        await agent.start()
        try:
            session = await agent.new_session(str(tmp_path), NoEditor())
            return await collect(session, "hi")
        finally:
            await agent.aclose()

    with ScriptedModelServer([text("fine")]) as server:
        events = await scenario(server)
    assert events[-1] == ev.TurnEnded("end_turn")
