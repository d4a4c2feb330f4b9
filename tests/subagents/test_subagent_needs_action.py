"""A child waiting for the user's permission answer is `needs-action` (ACP's subagent proposal) in
the hub, the `agents.*` kernel API and `/agents`; it is `running` again once answered."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_subagent_hub import WAIT, make_agent

from agent_core.ports import PermissionDecision, PermissionRequest
from agent_core.subagents import SubagentHub
from agent_core.subagents.commands import agents_command
from agent_core.subagents.host_ops import handlers
from agent_core.testing import ScriptedModelServer, text, tool_call


class HeldEditor:
    """The parent's editor: a permission request waits until the test answers it."""

    can_read_files = False
    can_write_files = False

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.answer: asyncio.Future[PermissionDecision] | None = None
        self.requests: list[PermissionRequest] = []

    async def request_permission(self, request: PermissionRequest) -> PermissionDecision:
        self.requests.append(request)
        self.answer = asyncio.get_running_loop().create_future()
        self.asked.set()
        return await self.answer

    async def read_text_file(self, path: str) -> str:
        raise NotImplementedError

    async def write_text_file(self, path: str, content: str) -> None:
        raise NotImplementedError


def test_a_child_waiting_for_a_permission_answer_needs_action_everywhere_until_answered(
    tmp_path: Path,
) -> None:
    routes = {"[[asker]]": [tool_call("print('asked')"), text("asker done")]}

    async def scenario(server: ScriptedModelServer) -> dict[str, Any]:
        agent = make_agent(tmp_path, server)
        hub = SubagentHub.install(agent)
        try:
            editor = HeldEditor()
            parent = await agent.new_session(str(tmp_path), editor)
            parent.set_mode("ask")  # the child asks before its cells too
            await hub.spawn(parent, "[[asker]] run a cell", name="asker")
            await asyncio.wait_for(editor.asked.wait(), WAIT)
            seen: dict[str, Any] = {
                "hub": hub.child(parent.id, "asker").state,
                "needing": [r.name for r in hub.needing_action(parent.id)],
                "api": [c["state"] for c in await handlers(hub, parent)["agents.list"]({})],
                "command": await agents_command(hub, parent.id, ""),
                "request": editor.requests[0],
            }
            assert editor.answer is not None
            editor.answer.set_result("reject")  # answered: no kernel needed, the child goes on
            record = await asyncio.wait_for(_final(hub, parent.id), WAIT)
            seen["after"] = record.state
            seen["needing_after"] = hub.needing_action(parent.id)
            return seen
        finally:
            await agent.aclose()

    with ScriptedModelServer(routes=routes) as server:
        seen = asyncio.run(scenario(server))
    assert (seen["hub"], seen["needing"], seen["api"]) == ("needs-action", ["asker"], ["needs-action"])
    assert "`asker` **needs-action**" in seen["command"]
    assert "1 needs your action" in seen["command"]
    request = seen["request"]
    assert (request.subagent, request.title) == ("asker", "[subagent asker] print('asked')")
    assert (seen["after"], seen["needing_after"]) == ("finished", [])


async def _final(hub: SubagentHub, parent_id: str) -> Any:
    box = hub.inbox(parent_id)
    while True:
        for message in await box.wait(WAIT):
            if message.kind == "final":
                return hub.child(parent_id, message.sender)
