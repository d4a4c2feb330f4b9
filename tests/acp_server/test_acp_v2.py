"""The ACP v2 draft over real stdio (`CONTINUAL_ACP_PROTOCOL=2` and a client asking for version 2):
the prompt is acknowledged at once with its user message's id, `state_update`s frame the work
(running, requires_action while a cell waits for permission, idle with the stop reason), and the
background list follows refinement until it settles. Every frame is checked against the v2 draft
schema; the v1 path is pinned by every other stdio test and the golden files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, RpcError, select
from acp_helpers import ClientFactory

from agent_core.testing.scripted_model import ScriptedModelServer, error, response, text, tool_call

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


def v2_client(spawn: ClientFactory, model: ScriptedModelServer, **env: str) -> AcpClient:
    client = spawn(model.base_url, **env)
    client.v2 = True  # before any frame arrives: the server writes nothing before `initialize`
    return client


def v2_initialize(client: AcpClient) -> dict[str, Any]:
    result: dict[str, Any] = client.request(
        "initialize", {"protocolVersion": 2, "info": {"name": "pytest", "version": "1"}, "capabilities": {}}
    )
    return result


def states(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if u["sessionUpdate"] == "state_update"]


def prompt_v2(client: AcpClient, sid: str, words: str) -> tuple[str, int]:
    """Send a prompt; its acknowledged message id and the answer's sequence number."""
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": words}]}
    )
    frame = client.response_frame(rid, 60.0)
    assert "result" in frame.message, frame.message
    return frame.message["result"]["messageId"], frame.seq


def wait_idle(client: AcpClient, sid: str, count: int) -> None:
    """Until the session reported `idle` with a stop reason `count` times."""
    client.wait_for(
        lambda _m: sum(1 for s in states(client, sid) if s["state"] == "idle" and "stopReason" in s) >= count,
        60.0,
    )


def test_a_v2_session_is_acknowledged_at_once_framed_by_state_updates_and_its_background_settles(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    # One automatic review, after the first turn (the cooldown keeps it from the second).
    config = tmp_path / "config.toml"
    config.write_text("auto_refine_every = 1\nrefine_cooldown_seconds = 3600\n", encoding="utf-8")
    client = v2_client(spawn, model, CONTINUAL_ACP_PROTOCOL="2", CONTINUAL_ACP_CONFIG=str(config))
    init = v2_initialize(client)
    assert init["protocolVersion"] == 2 and init["info"]["name"] == "continual-acp"
    assert client.request("auth/login", {"methodId": init["authMethods"][0]["methodId"]}) == {}
    new = client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    sid = new["sessionId"]
    assert "modes" not in new

    # The turn is answered at once, and ends while its refinement still runs: idle with the
    # refinement in the background list, until it settles and an idle snapshot reports it gone.
    gate = json.dumps({"should_refine": True, "rationale": "a stated convention", "scope": "local"})
    model.push(
        response([{"hold": "answer"}, {"content": "Noted."}]),
        response([{"hold": "gate"}, {"content": gate}]),
        text(json.dumps(PLAN)),
    )
    message_id, answered = prompt_v2(client, sid, "We always run `make check`.")  # the model is held
    client.wait_for(lambda _m: any(u["sessionUpdate"] == "user_message" for u in client.updates(sid)), 30.0)
    echo = [u for u in client.updates(sid) if u["sessionUpdate"] == "user_message"]
    assert [(u["messageId"], u["content"][0]["text"]) for u in echo] == [
        (message_id, "We always run `make check`.")
    ]
    model.release("answer")
    wait_idle(client, sid, 1)
    replies = [f for f in client.frames if _update_kind(f.message) == "agent_message_chunk"]
    assert replies and answered < replies[0].seq, "the prompt was answered only after the model spoke"
    assert all(r.message["params"]["update"]["messageId"] for r in replies)
    [ended] = [s for s in states(client, sid) if "stopReason" in s]
    assert (ended["state"], ended["stopReason"]) == ("idle", "end_turn")
    assert [item["type"] for item in ended["background"]] == ["_refinement"]
    model.release("gate")
    client.wait_for(lambda _m: states(client, sid)[-1]["background"] == [], 60.0)
    assert states(client, sid)[-1] == {"sessionUpdate": "state_update", "state": "idle", "background": []}

    # A cell that waits for the user's permission: requires_action until it is answered (refused
    # here, so no kernel has to start: the turn goes on with the model's next request).
    client.permission_policy = select("reject")
    client.request(
        "session/set_config_option", {"sessionId": sid, "configId": "mode", "type": "id", "value": "ask"}
    )
    before = len(states(client, sid))
    model.push(tool_call("x = 41 + 1", "add"), text("x is 42"))
    prompt_v2(client, sid, "set x")
    wait_idle(client, sid, 2)
    assert [(s["state"], s.get("stopReason")) for s in states(client, sid)[before:]] == [
        ("running", None),
        ("requires_action", None),
        ("running", None),
        ("idle", "end_turn"),
    ]
    [permission] = [r for r in client.agent_requests if r["method"] == "session/request_permission"]
    assert permission["params"]["subject"]["toolCall"]["title"] == permission["params"]["title"]

    # A prompt for no session is refused before acceptance; a model failure after acceptance ends the
    # work as idle `error`, carrying what the v1 answer would have (the endpoint and its status).
    with pytest.raises(RpcError) as refused:
        client.request(
            "session/prompt", {"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "x"}]}
        )
    assert refused.value.code == -32002
    model.push(error(400, "the model rejected the request"))
    prompt_v2(client, sid, "fail")
    wait_idle(client, sid, 3)
    failed = [s for s in states(client, sid) if "stopReason" in s][-1]
    assert (failed["state"], failed["stopReason"], failed["error"]["data"]["status"]) == (
        "idle",
        "error",
        400,
    )

    # Resuming from the start replays the history in v2 shapes, then the state, then the answer.
    before = len(client.frames)
    rid = client.start_request(
        "session/resume", {"sessionId": sid, "cwd": str(tmp_path), "replayFrom": {"type": "start"}}
    )
    answer = client.response_frame(rid, 60.0)
    assert "modes" not in answer.message["result"]
    # Only what came before the answer (the commands are advertised after it, at their own pace).
    replayed = [
        f.message["params"]["update"]
        for f in client.frames[before:]
        if _update_kind(f.message) and f.seq < answer.seq
    ]
    assert [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"][:2] == [
        "We always run `make check`.",
        "set x",
    ]
    assert replayed[-1]["sessionUpdate"] == "state_update" and replayed[-1]["state"] == "idle"
    assert client.violations == [], client.violations


def _update_kind(message: dict[str, Any]) -> str | None:
    if message.get("method") != "session/update":
        return None
    kind = message["params"]["update"].get("sessionUpdate")
    return kind if isinstance(kind, str) else None


def test_a_v2_prompt_sent_mid_turn_steers_it_under_the_id_it_was_answered_with(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = v2_client(spawn, model, CONTINUAL_ACP_PROTOCOL="2")
    init = v2_initialize(client)
    assert init["capabilities"]["session"]["steering"] == {}
    sid = client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})["sessionId"]
    model.push(response([{"content": "thinking "}, {"hold": "v2-steer"}, {"content": "done"}]), text("both"))
    before = len(model.requests)
    first_id, _ = prompt_v2(client, sid, "write a long answer")
    model.wait_for_requests(before + 1)
    steer_id, _ = prompt_v2(client, sid, "and mention the tests")  # answered at once, mid-turn
    assert steer_id != first_id
    client.wait_for_stderr("a steering message waits for the next model request")
    model.release("v2-steer")
    wait_idle(client, sid, 1)
    assert len(model.requests) == before + 2  # one turn: the steer joined its second request
    assert model.requests[-1]["messages"][-1]["content"] == "and mention the tests"
    echoed = [u["messageId"] for u in client.updates(sid) if u["sessionUpdate"].startswith("user_message")]
    assert echoed == [first_id, steer_id] and steer_id.startswith("steer_")
    ended = [s for s in states(client, sid) if "stopReason" in s]
    assert [(s["state"], s["stopReason"]) for s in ended] == [("idle", "end_turn")]
