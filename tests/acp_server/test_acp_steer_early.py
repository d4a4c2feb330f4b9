"""`_session/steer` from the moment a prompt is received, over real stdio.

A prompt can spend a while before its turn starts (the harness set up, the command list refreshed,
pending reviews asked): a steer sent then waits for the turn's first model request instead of being
refused. The window is made deterministic here by a review the prompt asks before its turn and the
client leaves unanswered.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, RpcError
from acp_helpers import ClientFactory, initialize, new_session, prompt, send_prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call


def _wait(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        threading.Event().wait(0.02)


def _permission_requests(client: AcpClient) -> list[dict[str, Any]]:
    return [m for m in client.agent_requests if m.get("method") == "session/request_permission"]


def _hold_a_review(client: AcpClient, model: ScriptedModelServer, sid: str, cwd: Path) -> None:
    """A cell writes the project harness: the change is held, a review waits for the next prompt."""
    entry = cwd / ".continual-acp" / "harness" / "entries" / "prompt" / "note.md"
    code = f"import os\nos.makedirs({str(entry.parent)!r}, exist_ok=True)\nopen({str(entry)!r}, 'w').write('x')\n"
    model.push(tool_call(code), text("wrote it"))
    assert prompt(client, sid, "write a note").stop_reason == "end_turn"
    assert client.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 1


def test_a_steer_sent_before_the_prompts_turn_starts_joins_its_first_model_request(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(cwd))
    _hold_a_review(client, model, sid, cwd)
    client.hold_permissions = True
    asked_before = len(_permission_requests(client))
    model.push(text("heard both"))
    before = len(model.requests)
    turn = send_prompt(client, sid, "start the real work")
    _wait(lambda: len(_permission_requests(client)) > asked_before, "the prompt asks the held review")
    assert len(model.requests) == before  # the turn has not started: it waits for the review
    steer = client.start_request(
        "_session/steer", {"sessionId": sid, "prompt": [{"type": "text", "text": "use the new API"}]}
    )
    client.wait_for_stderr("a steering message waits for the next model request")
    asked = _permission_requests(client)[-1]
    reject = next(o["optionId"] for o in asked["params"]["options"] if o["kind"].startswith("reject"))
    client.hold_permissions = False
    client.send(
        {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": reject}},
        }
    )
    assert client.result(steer) == {"entered": True}
    assert client.result(turn)["stopReason"] == "end_turn"
    assert len(model.requests) == before + 1  # one request carried the prompt and the steer
    users = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert users[-1] == "use the new API" and "start the real work" in str(users[-2])


def test_a_steer_queued_for_a_prompt_that_runs_no_turn_answers_that_nothing_entered(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(cwd))
    _hold_a_review(client, model, sid, cwd)
    client.hold_permissions = True
    asked_before = len(_permission_requests(client))
    command = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}
    )
    _wait(lambda: len(_permission_requests(client)) > asked_before, "the prompt asks the held review")
    steer = client.start_request(
        "_session/steer", {"sessionId": sid, "prompt": [{"type": "text", "text": "never mind"}]}
    )
    client.wait_for_stderr("a steering message waits for the next model request")
    client.notify("session/cancel", {"sessionId": sid})
    assert client.result(command)["stopReason"] == "cancelled"
    answer = client.result(steer)
    assert answer["entered"] is False, answer


def test_a_steer_with_no_prompt_unanswered_is_still_refused(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    with pytest.raises(RpcError) as caught:
        client.request("_session/steer", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert caught.value.code == -32602 and "no turn is running" in str(caught.value.message)
