"""The hub with a real Agent on a scripted endpoint: admission, budgets, queue, shutdown and restart.

Children here answer in text (no cells), so no kernel is needed; the stdio tests run real cells.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent_core import Agent, load_config
from agent_core.ports import NoEditor
from agent_core.subagents import Limits, SubagentHub
from agent_core.subagents.commands import agents_command
from agent_core.testing import ScriptedModelServer, stall, text, usage

WAIT = 30.0


def make_agent(home: Path, server: ScriptedModelServer) -> Agent:
    config = load_config(
        {
            "CONTINUAL_ACP_HOME": str(home / "data"),
            "HOME": str(home),
            "CONTINUAL_ACP_KERNEL_POOL": "0",
            "CONTINUAL_ACP_MODEL": "scripted-model",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "k",
        }
    )
    config.eager_kernel = False  # text-only children never need a kernel
    config.max_retries = 0
    return Agent(config)


async def settled(hub: SubagentHub, parent_id: str, name: str) -> Any:
    """Wait for the child's final message in the parent's inbox; returns the child's record."""
    box = hub.inbox(parent_id)
    async with asyncio.timeout(WAIT):
        while True:
            for message in await box.wait(WAIT):
                if message.kind == "final" and message.sender == name:
                    return hub.child(parent_id, name)


def test_spawn_returns_at_admission_while_the_child_is_still_working(tmp_path: Path) -> None:
    routes = {"[[slow]]": [stall(2.0, then="slow answer")]}

    async def scenario(server: ScriptedModelServer) -> tuple[str, str, str | None]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        try:
            parent = await agent.new_session(str(tmp_path), NoEditor())
            handle = await hub.spawn(parent, "[[slow]] think", name="slow")
            state_at_return = handle.state  # the child's model is still stalling at this point
            record = await settled(hub, parent.id, "slow")
            return state_at_return, record.state, record.answer
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        at_return, final_state, answer = asyncio.run(scenario(server))
    assert (at_return, final_state, answer) == ("running", "finished", "slow answer")


def test_a_child_over_its_token_budget_fails_with_the_reason(tmp_path: Path) -> None:
    routes = {"[[greedy]]": [text("long answer", usage=usage(prompt_tokens=900, completion_tokens=300))]}

    async def scenario(server: ScriptedModelServer) -> Any:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent, Limits(token_budget=1000))
        try:
            parent = await agent.new_session(str(tmp_path), NoEditor())
            await hub.spawn(parent, "[[greedy]] spend", name="greedy")
            return await settled(hub, parent.id, "greedy")
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        record = asyncio.run(scenario(server))
    assert record.state == "failed"
    assert record.reason == "token budget exhausted: 1,200 tokens used of 1,000"


def test_a_child_over_its_wall_time_budget_fails_with_the_reason(tmp_path: Path) -> None:
    routes = {"[[sleepy]]": [stall(20.0, then="too late")]}

    async def scenario(server: ScriptedModelServer) -> Any:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent, Limits(max_seconds=0.3))
        try:
            parent = await agent.new_session(str(tmp_path), NoEditor())
            await hub.spawn(parent, "[[sleepy]] wait", name="sleepy")
            return await settled(hub, parent.id, "sleepy")
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        record = asyncio.run(scenario(server))
    assert record.state == "failed"
    assert record.reason == "wall-time budget exhausted: still running after 0.3 s"


def test_a_queued_child_that_is_cancelled_never_asks_the_model(tmp_path: Path) -> None:
    routes = {"[[first]]": [stall(1.0, then="first answer")], "[[second]]": [text("second answer")]}

    async def scenario(server: ScriptedModelServer) -> tuple[str, Any, Any]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent, Limits(max_running=1))
        try:
            parent = await agent.new_session(str(tmp_path), NoEditor())
            await hub.spawn(parent, "[[first]] go", name="first")
            second = await hub.spawn(parent, "[[second]] wait your turn", name="second")
            queued = second.state
            await hub.cancel(parent.id, "second")
            first = await settled(hub, parent.id, "first")
            return queued, hub.child(parent.id, "second"), first
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        queued, second, first = asyncio.run(scenario(server))
        assert server.requests_for("[[second]]") == []
    assert queued == "queued"
    assert (second.state, second.reason) == ("cancelled", "cancelled by its parent")
    assert first.state == "finished"


def test_a_child_running_at_shutdown_is_interrupted_by_restart_in_the_next_process(tmp_path: Path) -> None:
    routes = {"[[cut]]": [stall(30.0, then="never")]}

    async def first_run(server: ScriptedModelServer) -> tuple[str, str]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        parent = await agent.new_session(str(tmp_path), NoEditor())
        child = await hub.spawn(parent, "[[cut]] run long", name="cut")
        await asyncio.to_thread(server.wait_for_requests, 1)
        await agent.aclose()
        return parent.id, child.session_id

    async def second_run(server: ScriptedModelServer, parent_id: str) -> tuple[Any, str]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        try:
            (record,) = hub.children(parent_id)
            return record, await agents_command(hub, parent_id, "")
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        parent_id, child_id = asyncio.run(first_run(server))
        record, listing = asyncio.run(second_run(server, parent_id))
    assert (record.session_id, record.state) == (child_id, "interrupted")
    assert record.reason.startswith("interrupted by restart")
    assert "`cut` **interrupted**" in listing


def test_wait_settled_returns_once_every_child_has_ended_and_times_out_before(tmp_path: Path) -> None:
    routes = {"[[a]]": [stall(0.5, then="a")], "[[b]]": [stall(1.0, then="b")]}

    async def scenario(server: ScriptedModelServer) -> tuple[bool, bool, int]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        try:
            parent = await agent.new_session(str(tmp_path), NoEditor())
            await hub.spawn(parent, "[[a]] go", name="a")
            await hub.spawn(parent, "[[b]] go", name="b")
            early = await hub.wait_settled(parent.id, 0.01)
            settled = await hub.wait_settled(parent.id, WAIT)
            return early, settled, hub.running_children(parent.id)
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        assert asyncio.run(scenario(server)) == (False, True, 0)


def test_a_child_cut_short_by_its_output_limit_is_idle_and_its_last_words_still_arrive(
    tmp_path: Path,
) -> None:
    from agent_core.testing import length_cut

    routes = {"[[cut]]": [length_cut("half an ans")]}

    async def scenario(server: ScriptedModelServer) -> tuple[Any, list[Any]]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        try:
            parent = await agent.new_session(str(tmp_path), NoEditor())
            await hub.spawn(parent, "[[cut]] write a lot", name="cut")
            await hub.wait_settled(parent.id, WAIT)
            return hub.child(parent.id, "cut"), hub.inbox(parent.id).take()
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        record, inbox = asyncio.run(scenario(server))
    assert (record.state, record.stop_reason) == ("idle", "max_tokens")
    assert [(m.kind, m.state) for m in inbox] == [("final", "idle")]
    assert inbox[0].text.startswith("stopped before finishing (max_tokens)")


def test_a_child_can_message_its_sibling_by_name(tmp_path: Path) -> None:
    routes = {"[[s1]]": [text("one")], "[[s2]]": [text("two")]}

    async def scenario(server: ScriptedModelServer) -> list[tuple[str, str]]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        try:
            parent = await agent.new_session(str(tmp_path), NoEditor())
            first = await hub.spawn(parent, "[[s1]] go", name="s1")
            second = await hub.spawn(parent, "[[s2]] go", name="s2")
            sender = agent.get_session(first.session_id)
            hub.send(sender, "hello sibling", to="s2")
            return [(m.sender, m.text) for m in hub.inbox(second.session_id).take()]
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        assert asyncio.run(scenario(server)) == [("s1", "hello sibling")]


def test_a_final_answer_nobody_read_before_a_restart_arrives_in_the_next_process_once(tmp_path: Path) -> None:
    routes = {"[[unread]]": [text("the unread answer")]}

    async def first_run(server: ScriptedModelServer) -> str:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        try:
            parent = await agent.new_session(str(tmp_path), NoEditor())
            await hub.spawn(parent, "[[unread]] answer", name="unread")
            await hub.wait_settled(parent.id, WAIT)  # finished; its final sits unread in the inbox
            return str(parent.id)
        finally:
            await agent.aclose()

    async def later_run(server: ScriptedModelServer, parent_id: str) -> list[tuple[str, str]]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        try:
            hub.children(parent_id)  # the links are read
            return [(m.kind, m.text) for m in hub.take(parent_id)]
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        parent_id = asyncio.run(first_run(server))
        assert asyncio.run(later_run(server, parent_id)) == [("final", "the unread answer")]
        assert asyncio.run(later_run(server, parent_id)) == []  # taken once: not delivered again


def test_a_child_cut_off_by_a_restart_delivers_an_interrupted_final_in_the_next_process(
    tmp_path: Path,
) -> None:
    routes = {"[[cut]]": [stall(30.0, then="never")]}

    async def first_run(server: ScriptedModelServer) -> str:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        parent = await agent.new_session(str(tmp_path), NoEditor())
        await hub.spawn(parent, "[[cut]] run long", name="cut")
        await asyncio.to_thread(server.wait_for_requests, 1)
        await agent.aclose()
        return str(parent.id)

    async def second_run(server: ScriptedModelServer, parent_id: str) -> list[tuple[str, str | None]]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        try:
            hub.children(parent_id)
            return [(m.kind, m.state) for m in hub.take(parent_id)]
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        parent_id = asyncio.run(first_run(server))
        assert asyncio.run(second_run(server, parent_id)) == [("final", "interrupted")]
