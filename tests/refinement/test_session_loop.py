"""Refinement attached to a real agent session: after-turn trigger, background apply, next prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core import Agent, NoEditor, TextPart, load_config
from agent_core.refinement.attach import SessionRefinement
from agent_core.testing.scripted_model import ScriptedModelServer, text

from .conftest import gate_reply, memory_edit, plan_reply, planner_requests, turn_requests

pytestmark = pytest.mark.anyio

WAIT = 30.0

SKILL = {
    "action": "create",
    "kind": "skill",
    "id": "run_checks",
    "title": "Run checks",
    "content": "Runs `make check` and returns its exit code.",
    "reference": {"type": "python", "import": "project_tools.checks", "callable": "run_checks"},
    "arguments": {},
}


def _config(tmp_path: Path, server: ScriptedModelServer) -> Any:
    env = {
        "CONTINUAL_ACP_HOME": str(tmp_path / "data"),
        "HOME": str(tmp_path),
        "CONTINUAL_ACP_KERNEL_POOL": "0",
        "CONTINUAL_ACP_MODEL": "scripted-model",
        "OPENAI_BASE_URL": server.base_url,
    }
    config = load_config(env)
    config.eager_kernel = False
    config.max_retries = 0
    # trust: SKILL imports a module that does not exist; verify_skills off for this loop test.
    config.extra.update(auto_refine_every=1, refine_cooldown_seconds=0, verify_skills=False)
    return config


async def _turn(session: Any, prompt: str) -> list[Any]:
    return [event async for event in session.run_turn([TextPart(prompt)])]


async def test_auto_refinement_lands_in_the_next_system_prompt_and_rollback_removes_it(
    tmp_path: Path,
) -> None:
    with ScriptedModelServer() as server:
        attached: dict[str, SessionRefinement] = {}
        agent = Agent(
            _config(tmp_path, server),
            on_session=lambda s: attached.setdefault(s.id, SessionRefinement.attach(s)),
        )
        await agent.start()
        try:
            session = await agent.new_session(str(tmp_path), NoEditor())
            refinement = attached[session.id]
            server.push(
                text("Noted: checks run with make check."),
                gate_reply(True),
                plan_reply(memory_edit(evidence=[]), SKILL),
            )
            await _turn(session, "We always run `make check`, never bare pytest.")
            assert await refinement.surface.wait_quiescent(WAIT)
            last = refinement.surface.status().last
            assert last is not None and last.status == "applied", last
            memory = session.local_store.load().get("memory", "test_command")
            assert memory is not None and memory.trust == "candidate"
            # The planner read the transcript with ids: the user's message and the answer, each tagged.
            [planner] = planner_requests(server)
            planner_input = planner["messages"][1]["content"]
            assert "] user:\nWe always run `make check`, never bare pytest." in planner_input
            assert "] assistant:\nNoted: checks run with make check." in planner_input

            server.push(text("Running them."), gate_reply(False))
            await _turn(session, "run the checks")
            assert await refinement.surface.wait_quiescent(WAIT)
            system = turn_requests(server)[-1]["messages"][0]["content"]
            assert "Run `make check`, not bare pytest." in system and "run_checks" in system

            assert last.refinement_id is not None
            session.local_store.rollback(last.refinement_id)
            server.push(text("Done."), gate_reply(True), plan_reply(memory_edit(evidence=[])))
            await _turn(session, "thanks")
            assert await refinement.surface.wait_quiescent(WAIT)
            system = turn_requests(server)[-1]["messages"][0]["content"]
            assert "make check`, not bare pytest" not in system and "run_checks" not in system
            again = refinement.surface.status().last
            assert again is not None and again.status == "refused"
            assert again.error is not None and "content was rejected before (tombstone" in again.error
        finally:
            for item in attached.values():
                await item.aclose()
            await agent.aclose()


class LoaderSkills:
    """The composition root's SkillsPort, built on skills.loader (tests may import both sides)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def setup_code(self, cwd: str) -> str | None:
        from skills.loader import setup_code
        from skills.user_skills import skill_roots

        return setup_code(skill_roots(cwd, self.env))

    def index_text(self, cwd: str) -> str:
        return ""


async def test_refine_run_in_a_model_cell_applies_after_the_turn_through_the_real_kernel(
    tmp_path: Path,
) -> None:
    from agent_core.testing.scripted_model import tool_call

    with ScriptedModelServer() as server:
        attached: dict[str, SessionRefinement] = {}
        config = _config(tmp_path, server)
        config.extra.update(auto_refine_every=0)
        agent = Agent(
            config,
            skills=LoaderSkills({"HOME": str(tmp_path)}),
            on_session=lambda s: attached.setdefault(s.id, SessionRefinement.attach(s)),
        )
        await agent.start()
        try:
            session = await agent.new_session(str(tmp_path), NoEditor())
            server.push(
                tool_call("r = await refine.run('remember the test command')\nprint(r['scheduled'])"),
                text("Scheduled a refinement."),
                plan_reply(memory_edit(evidence=[])),
            )
            events = await _turn(session, "Remember: we run `make check`.")
            finished = [e for e in events if type(e).__name__ == "CellFinished"]
            assert finished and finished[0].status == "completed" and "True" in finished[0].output
            refinement = attached[session.id]
            assert await refinement.surface.wait_quiescent(WAIT)
            assert (
                refinement.surface.status().last is not None
                and refinement.surface.status().last.trigger == "model"
            )
            entry = session.local_store.load().get("memory", "test_command")
            assert entry is not None and entry.trust == "candidate"
            [planner] = planner_requests(server)
            planner_prompt = planner["messages"][1]["content"]
            assert "remember the test command" in planner_prompt
        finally:
            await agent.aclose()


async def test_evidence_is_checked_against_the_real_session_transcript(tmp_path: Path) -> None:
    from agent_core.events import UserMessage

    with ScriptedModelServer() as server:
        attached: dict[str, SessionRefinement] = {}
        config = _config(tmp_path, server)
        config.extra.update(auto_refine_every=0)
        agent = Agent(config, on_session=lambda s: attached.setdefault(s.id, SessionRefinement.attach(s)))
        await agent.start()
        try:
            session = await agent.new_session(str(tmp_path), NoEditor())
            server.push(text("Noted."))
            await _turn(session, "We always run `make check`.")
            [user] = [e for e in session.store.load(session.id).events if isinstance(e, UserMessage)]
            cited = memory_edit(evidence=[user.message_id])
            invented = memory_edit("Deploy on Fridays.", evidence=["m-invented"]) | {
                "id": "deploy_day",
                "title": "Deploy day",
            }
            server.push(plan_reply(cited, invented))
            outcome = await attached[session.id].surface.refine_now()
            assert outcome.status == "applied"
            assert outcome.error == "create memory deploy_day: evidence cites unknown message m-invented"
            entry = session.local_store.load().get("memory", "test_command")
            assert entry is not None and entry.evidence == [user.message_id]
            assert session.local_store.load().get("memory", "deploy_day") is None
        finally:
            await agent.aclose()


async def test_a_turn_that_fails_after_a_cell_scheduled_refinement_still_settles(tmp_path: Path) -> None:
    from agent_core import ModelError
    from agent_core.testing.scripted_model import error, tool_call

    with ScriptedModelServer() as server:
        attached: dict[str, SessionRefinement] = {}
        config = _config(tmp_path, server)
        config.extra.update(auto_refine_every=0)
        agent = Agent(
            config,
            skills=LoaderSkills({"HOME": str(tmp_path)}),
            on_session=lambda s: attached.setdefault(s.id, SessionRefinement.attach(s)),
        )
        await agent.start()
        try:
            session = await agent.new_session(str(tmp_path), NoEditor())
            server.push(tool_call("await refine.run()"), error(500), plan_reply(memory_edit(evidence=[])))
            with pytest.raises(ModelError):
                await _turn(session, "Remember: we run `make check`.")
            refinement = attached[session.id]
            assert await refinement.surface.wait_quiescent(WAIT)
            assert (
                refinement.surface.status().last is not None
                and refinement.surface.status().last.status == "applied"
            )
        finally:
            await agent.aclose()


async def test_an_autonomous_checkpoint_asks_an_attached_session_for_an_automatic_review(
    tmp_path: Path,
) -> None:
    from agent_core.bus import AutonomousCheckpoint

    with ScriptedModelServer() as server:
        attached: dict[str, SessionRefinement] = {}
        agent = Agent(
            _config(tmp_path, server),
            on_session=lambda s: attached.setdefault(s.id, SessionRefinement.attach(s)),
        )
        await agent.start()
        try:
            session = await agent.new_session(str(tmp_path), NoEditor())
            server.push(gate_reply(False))
            await session.bus.publish(AutonomousCheckpoint("autonomous checkpoint after 2 continuations"))
            surface = attached[session.id].surface
            assert await surface.wait_quiescent(WAIT)
            last = surface.status().last
            assert last is not None and (last.trigger, last.status) == ("auto", "declined")
        finally:
            await agent.aclose()
