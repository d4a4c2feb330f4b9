"""A cap on live kernels: with max_kernels=1 a new session's kernel takes the slot of the coldest
kernel, which hibernates; when that one is pinned (`/kernel keep`) the new session waits, says why,
and runs once the first closes. Real server over stdio, real kernels."""

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


def test_past_max_kernels_a_pinned_kernel_makes_the_new_session_wait_an_unpinned_one_hibernates(
    tmp_path: Path,
) -> None:
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
            assert run_command(client, first, "/kernel keep").startswith("Kernel pinned")
            second, _ = new_session(client, str(tmp_path))
            waiting = _status_until(client, second, "waiting for a kernel slot")
            assert "max_kernels=1" in waiting
            client.request("session/close", {"sessionId": first})
            _status_until(client, second, "kernel pid")
            assert prompt(client, second, "run it", timeout=120)[0] == "end_turn"
            third, _ = new_session(client, str(tmp_path))
            _status_until(client, third, "kernel pid")  # no wait: the second (unpinned) hibernated
            slept = run_command(client, second, "/kernel status")
            assert slept.startswith("Kernel: hibernated") and "max_kernels=1" in slept, slept
    tool_result = str(model.requests[1]["messages"][-1]["content"])
    assert "b ran" in tool_result
