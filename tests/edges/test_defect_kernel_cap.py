"""A cap on live kernels: with max_kernels=1 a second session waits, says why, and runs once the
first closes. Real server over stdio, real kernels."""

from __future__ import annotations

import time
from pathlib import Path

from defect_support import AcpClient, new_session, prompt, run_command, served

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call


def _status_until(client: AcpClient, sid: str, needle: str, timeout: float = 90.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        status = run_command(client, sid, "/kernel status")
        if needle in status:
            return status
        assert time.monotonic() < deadline, f"/kernel status never said {needle!r}; last: {status}"
        time.sleep(0.2)


def test_a_session_past_max_kernels_waits_says_why_and_runs_when_a_slot_frees(tmp_path: Path) -> None:
    with ScriptedModelServer([tool_call("print('b ran')", title="b"), text("done")]) as model:
        with served(
            # Eager kernels (the product default): the second session waits for a slot at session/new.
            tmp_path / "home",
            tmp_path,
            model.base_url,
            CONTINUAL_ACP_MAX_KERNELS="1",
            CONTINUAL_ACP_EAGER_KERNEL="1",
        ) as client:
            first, _ = new_session(client, str(tmp_path))
            _status_until(client, first, "kernel pid")
            second, _ = new_session(client, str(tmp_path))
            waiting = _status_until(client, second, "waiting for a kernel slot")
            assert "max_kernels=1" in waiting
            client.request("session/close", {"sessionId": first})
            _status_until(client, second, "kernel pid")
            assert prompt(client, second, "run it", timeout=120)[0] == "end_turn"
    tool_result = str(model.requests[1]["messages"][-1]["content"])
    assert "b ran" in tool_result
