"""An ended child gives its kernel back at once (not when its parent closes); loading the child
later starts a kernel that restores the child's snapshot. Real kernels: one per child start."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_subagent_hub import WAIT, make_agent

from agent_core.bus import KernelReady
from agent_core.ports import NoEditor
from agent_core.subagents import SubagentHub
from agent_core.testing import ScriptedModelServer, text, tool_call


def test_a_finished_child_releases_its_kernel_and_a_later_load_restores_its_state(tmp_path: Path) -> None:
    routes = {"[[keeper]]": [tool_call("x = 41"), text("kept x")]}

    async def scenario(server: ScriptedModelServer) -> tuple[Any, ...]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        kernels: list[Any] = []
        attach = agent.on_session

        def on_session(session: Any) -> None:
            attach(session)
            session.bus.subscribe(
                KernelReady, lambda ready: kernels.append(ready.kernel)
            )  # every kernel a session gets

        agent.on_session = on_session
        try:
            parent = await agent.new_session(str(tmp_path), NoEditor())
            child = await hub.spawn(parent, "[[keeper]] keep a value", name="keeper")
            assert await hub.wait_settled(parent.id, WAIT)
            await asyncio.wait_for(hub.released(), WAIT)
            first_alive = kernels[0].alive  # the child's (the parent never ran a cell)
            session = agent.get_session(child.session_id)
            status = await session.kernel_status()
            loaded, _ = await agent.load_session(child.session_id, str(tmp_path), NoEditor())
            kernel = await loaded.kernel()
            out = "".join([getattr(item, "text", "") async for item in kernel.execute("print(x + 1)")])
            return hub.child(parent.id, "keeper").state, first_alive, status, len(kernels), out
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        state, first_alive, status, started, out = asyncio.run(scenario(server))
    assert (state, first_alive) == ("finished", False)
    assert status.startswith("released")
    assert (started, out.strip()) == (2, "42")  # a new kernel, restored from the child's snapshot
