"""A turn that raises tells the turn-failure hooks, the attached refinement among them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_helpers import collect, config_for, running_agent

from agent_core import Session
from agent_core.bus import TurnFailed
from agent_core.errors import ModelError
from agent_core.ports import NoEditor
from agent_core.testing import ScriptedModelServer, error, text


class _Refinement:
    def __init__(self) -> None:
        self.failed = 0

    def turn_failed(self) -> None:
        self.failed += 1


def _fail_then_succeed(
    tmp_path: Path, attach: Callable[[Session], Callable[[], object]]
) -> tuple[object, object]:
    """(turn_failed calls after a failed turn, after a successful one)."""

    async def scenario(server: ScriptedModelServer) -> tuple[object, object]:
        async with running_agent(config_for(tmp_path, server, max_retries=0)) as agent:
            session = await agent.new_session(str(tmp_path), NoEditor())
            counter = attach(session)
            with pytest.raises(ModelError):
                await collect(session, "fails")
            after_failure = counter()
            await collect(session, "works")
            return after_failure, counter()

    with ScriptedModelServer([error(400, "bad request"), text("ok")]) as server:
        return asyncio.run(scenario(server))


def test_a_failed_turn_tells_the_attached_refinement_once_and_a_good_turn_does_not(tmp_path: Path) -> None:
    def attach(session: Session) -> Callable[[], object]:
        refinement = _Refinement()
        session.refinement = refinement
        return lambda: refinement.failed

    assert _fail_then_succeed(tmp_path, attach) == (1, 1)


def test_a_failed_turn_runs_every_turn_failure_hook(tmp_path: Path) -> None:
    def attach(session: Session) -> Callable[[], object]:
        calls: list[str] = []
        session.bus.subscribe(TurnFailed, lambda _: calls.append("hook"))
        return lambda: len(calls)

    assert _fail_then_succeed(tmp_path, attach) == (1, 1)


def test_replacing_the_refinement_stops_telling_the_old_one(tmp_path: Path) -> None:
    def attach(session: Session) -> Callable[[], object]:
        old, new = _Refinement(), _Refinement()
        session.refinement = old
        session.refinement = new
        return lambda: (old.failed, new.failed)

    assert _fail_then_succeed(tmp_path, attach) == ((0, 1), (0, 1))


def test_a_failing_turn_failure_hook_does_not_hide_the_turn_error(tmp_path: Path) -> None:
    def attach(session: Session) -> Callable[[], object]:
        refinement = _Refinement()

        def broken(_: TurnFailed) -> None:
            raise RuntimeError("hook bug")

        session.bus.subscribe(TurnFailed, broken)
        session.refinement = refinement
        return lambda: refinement.failed

    assert _fail_then_succeed(tmp_path, attach) == (1, 1)
