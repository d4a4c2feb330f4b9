"""The ACP v2 draft seen by the official SDK's v2 client: `run-v2.mjs` drives the real server started
with `CONTINUAL_ACP_PROTOCOL=2` over stdio, validating every frame in both directions against the
v2 draft schema the npm package ships; this test scripts the model."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import server_zygote
from system_deps import requires
from test_conformance import NODE, _node, assert_run_clean, node_env

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
    from agent_core.testing.scripted_model import ScriptedModelServer, response, text, tool_call

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
        # The third prompt's answer is held after its first words until the steer was acknowledged.
        response([{"content": "thinking "}, {"hold": "v2-steer"}, {"content": "done"}]),
        text("both, with the tests"),
    ]
    steered = tmp_path / "steered"
    plan = {
        "agent": server_zygote.server_command(),
        "cwd": str(workdir),
        "first": "We always run `make check`.",
        "second": "set x",
        "third": "write a long answer",
        "steer": "and mention the tests",
        "steered": str(steered),
    }
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    with ScriptedModelServer(script) as model:
        env = node_env(
            tmp_path,
            model.base_url,
            CONTINUAL_ACP_PROTOCOL="2",
            CONTINUAL_ACP_CONFIG=str(config),
            CONTINUAL_ACP_KERNEL_POOL="0",
            CONTINUAL_ACP_EAGER_KERNEL="0",
        )
        releaser = threading.Thread(target=_release_after, args=(steered, model, "v2-steer"), daemon=True)
        releaser.start()
        try:
            report = _node("run-v2.mjs", str(plan_path), env=env)
        finally:
            model.release("v2-steer")  # a run that failed before the steer must not leave it held
            releaser.join(timeout=5)
        requests = list(model.requests)
    assert_run_clean(report)
    assert report["ok"] is True
    # One turn: the steer joined the held turn's next request instead of starting a turn of its own.
    assert requests[-1]["messages"][-1]["content"] == "and mention the tests"
    assert [m["content"] for m in requests[-1]["messages"] if m.get("role") == "user"][-2:] == [
        "write a long answer",
        "and mention the tests",
    ]


def _release_after(marker: Path, model: Any, hold: str, timeout: float = 100.0) -> None:
    """Release `hold` once `marker` exists (the Node client writes it when the steer was acknowledged)."""
    deadline = time.monotonic() + timeout
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    model.release(hold)
