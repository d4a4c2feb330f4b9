"""`Agent.new_session(defer_setup=True)`: acp_server answers session/new before the session's
`on_session` seam (refinement, autonomous mode) runs, then runs it once with `finish_setup`."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_helpers import config_for

from agent_core import Agent
from agent_core.bus import KernelReady
from agent_core.ports import NoEditor
from agent_core.session import Session

pytestmark = pytest.mark.anyio


def counting_agent(tmp_path: Path) -> tuple[Agent, list[str]]:
    seen: list[str] = []

    def on_session(session: Session) -> None:
        seen.append(session.id)

    return Agent(config_for(tmp_path, None), on_session=on_session), seen


async def test_a_deferred_session_setup_waits_for_finish_setup(tmp_path: Path) -> None:
    agent, seen = counting_agent(tmp_path)
    try:
        session = await agent.new_session(str(tmp_path), NoEditor(), defer_setup=True)
        assert seen == []
        agent.finish_setup(session)
        assert seen == [session.id]
    finally:
        await agent.aclose()


async def test_finish_setup_runs_the_seam_once(tmp_path: Path) -> None:
    agent, seen = counting_agent(tmp_path)
    try:
        session = await agent.new_session(str(tmp_path), NoEditor(), defer_setup=True)
        agent.finish_setup(session)
        agent.finish_setup(session)
        assert seen == [session.id]
    finally:
        await agent.aclose()


async def test_finish_setup_of_a_session_set_up_at_once_does_not_run_the_seam_again(tmp_path: Path) -> None:
    agent, seen = counting_agent(tmp_path)
    try:
        session = await agent.new_session(str(tmp_path), NoEditor())
        agent.finish_setup(session)
        assert seen == [session.id]
    finally:
        await agent.aclose()


async def test_a_session_closed_before_its_deferred_setup_is_never_set_up(tmp_path: Path) -> None:
    agent, seen = counting_agent(tmp_path)
    try:
        session = await agent.new_session(str(tmp_path), NoEditor(), defer_setup=True)
        await agent.close_session(session.id)
        agent.finish_setup(session)
        assert seen == []
    finally:
        await agent.aclose()


async def test_a_kernel_that_starts_before_the_deferred_setup_runs_it_first_so_its_hooks_see_the_kernel(
    tmp_path: Path,
) -> None:
    """The first cell may start the kernel before acp_server calls `finish_setup` (a prompt right after
    session/new): the seam runs first, so the kernel hooks it adds (host ops) see this kernel."""
    hooked: list[int | None] = []

    def on_session(session: Session) -> None:
        session.bus.subscribe(KernelReady, lambda ready: hooked.append(ready.kernel.kernel_pid))

    agent = Agent(config_for(tmp_path, None), on_session=on_session)
    try:
        session = await agent.new_session(str(tmp_path), NoEditor(), defer_setup=True)
        kernel = await session.kernel_handle.get()  # no finish_setup call: the kernel start runs it
        assert hooked == [kernel.kernel_pid] and kernel.kernel_pid is not None
        agent.finish_setup(session)  # acp_server's call after the answer: nothing runs twice
        assert len(hooked) == 1
    finally:
        await agent.aclose()
