"""The ACP v2 draft seen by the official SDK's v2 client: `run-v2.mjs` drives the real server started
with `CONTINUAL_ACP_PROTOCOL=2` over stdio, validating every frame in both directions against the
v2 draft schema the npm package ships; this test scripts the model."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from system_deps import requires
from test_conformance import NODE, _node

pytestmark = requires(NODE is not None, "node is not installed")

GATE = {"should_refine": True, "rationale": "a stated convention", "scope": "local"}
PLAN = {
    "summary": "Remember the test command",
    "rationale": "stated by the user",
    "expected_outcome": "x",
    "edits": [
        {
            "action": "create",
            "kind": "memory",
            "id": "test_command",
            "title": "Test command",
            "content": "Run `make check`.",
            "evidence": [],
        }
    ],
}


def test_the_official_v2_client_sees_the_prompt_acknowledged_its_states_and_the_background_settle(
    tmp_path: Path,
) -> None:
    from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

    workdir = tmp_path / "project"
    workdir.mkdir()
    config = tmp_path / "config.toml"
    # One automatic review, after the first turn (the cooldown keeps it from the second).
    config.write_text("auto_refine_every = 1\nrefine_cooldown_seconds = 3600\n", encoding="utf-8")
    script = [
        text("Noted."),
        text(json.dumps(GATE)),
        text(json.dumps(PLAN)),
        tool_call("x = 41 + 1", "add"),
        text("x is not set: you declined."),
    ]
    plan = {
        "agent": [sys.executable, "-m", "acp_server"],
        "cwd": str(workdir),
        "first": "We always run `make check`.",
        "second": "set x",
    }
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    with ScriptedModelServer(script) as model:
        env = dict(os.environ)
        env.update(
            CONTINUAL_ACP_HOME=str(tmp_path / "home"),
            XDG_CONFIG_HOME=str(tmp_path / "xdg"),
            HOME=str(tmp_path),
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="test-key",
            CONTINUAL_ACP_MODEL="scripted",
            CONTINUAL_ACP_PROTOCOL="2",
            CONTINUAL_ACP_CONFIG=str(config),
            CONTINUAL_ACP_KERNEL_POOL="0",
            CONTINUAL_ACP_EAGER_KERNEL="0",
        )
        report = _node("run-v2.mjs", str(plan_path), env=env)
    failed = [s for s in report["steps"] if not s["ok"]]
    assert not failed, json.dumps(failed, indent=1) + "\n" + report["_stderr"][-3000:]
    assert report["findings"] == [], json.dumps(report["findings"], indent=1)
    assert report["sdkErrors"] == []
    assert report["ok"] is True
