"""Subagents seen by the official ACP SDK client: the spawn card follows the child to its answer.

`run-subagents.mjs` spawns the real server over stdio and validates every frame in both directions
against the JSON schema the npm package ships; this test scripts parent and child on one endpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import server_zygote
from system_deps import requires
from test_conformance import NODE, _node, assert_run_clean, node_env

pytestmark = requires(NODE is not None, "node is not installed")

PARENT_CELL = """\
await agents.spawn("[[conformance-child]] say hello", name="helper")
finals = []
while not finals:
    finals = [m for m in await agents.inbox(wait=True, timeout=60) if m.get("final")]
print(finals[0]["text"])
"""


def test_official_sdk_client_sees_a_subagent_card_end_with_the_childs_answer(tmp_path: Path) -> None:
    from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

    workdir = tmp_path / "project"
    workdir.mkdir()
    routes = {"[[conformance-child]]": [tool_call("print('child kernel ok')"), text("hello from the helper")]}
    script = [tool_call(PARENT_CELL, title="Delegate a greeting"), text("The helper said hello.")]
    plan = {
        "agent": server_zygote.server_command(),
        "cwd": str(workdir),
        "prompt": "Ask a helper to say hello",
        "child": "helper",
        "answer": "hello from the helper",
    }
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    with ScriptedModelServer(script, routes=routes) as model:
        env = node_env(
            tmp_path,
            model.base_url,
        )
        report = _node("run-subagents.mjs", str(plan_path), env=env)
    assert_run_clean(report)
    assert report["ok"] is True
