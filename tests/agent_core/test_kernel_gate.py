"""`Agent.kernel_gate`: acp_server holds every kernel start until its first session answer is out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_helpers import config_for

from agent_core import Agent
from agent_core.ports import NoEditor

pytestmark = pytest.mark.anyio


def _kernel_children() -> list[int]:
    """Pids of this process's children that run ipykernel (Linux /proc)."""
    found: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"ipykernel" in cmdline or b"IPKernelApp" in cmdline:
                found.append(int(pid))
    return found


async def test_an_eager_kernel_start_waits_for_the_kernel_gate(tmp_path: Path) -> None:
    agent = Agent(config_for(tmp_path, None, eager_kernel=True))
    agent.kernel_gate = asyncio.Event()
    try:
        session = await agent.new_session(str(tmp_path), NoEditor())
        starting = session.kernel_handle.start()  # the eager start's task
        for _ in range(50):  # let the task run as far as it can without the gate
            await asyncio.sleep(0)
        assert not starting.done()
        # session/new checked the local backend without building the pool (no jupyter_client or zmq
        # import on that path) and launched nothing before the gate opens.
        assert agent._pool is None
        assert _kernel_children() == []
    finally:
        await agent.aclose()


async def test_closing_the_agent_releases_a_held_kernel_start_without_starting_a_kernel(
    tmp_path: Path,
) -> None:
    agent = Agent(config_for(tmp_path, None, eager_kernel=True))
    agent.kernel_gate = asyncio.Event()
    session = await agent.new_session(str(tmp_path), NoEditor())
    starting = session.kernel_handle.start()
    await asyncio.wait_for(agent.aclose(), 30)
    assert starting.done() and isinstance(starting.exception(), RuntimeError)
    assert agent._pool is None
