"""Unstable ACP v1 frames only for clients that advertise them: the plan goes as `plan_update` by id to
a client with `plan`, as the stable `plan` to one without; the prompt response's `usage` only to a
client that speaks the unstable schema; every frame is checked (the unstable ones
against the schema the npm SDK ships)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session, run_command, send_prompt

from agent_core.testing import ScriptedModelServer, response, text, tool_call, usage


def plan_updates(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if u["sessionUpdate"] in ("plan", "plan_update", "plan_removed")]


def test_a_client_that_advertises_plan_gets_plan_update_by_id_and_one_that_does_not_gets_plan(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    for name, capabilities in (("plan", {"plan": {}}), ("plain", {})):
        client = spawn()
        initialize(client, **capabilities)
        sid, _ = new_session(client, tmp_path)
        reply = run_command(client, sid, "/goal make the import tests pass")
        assert "make the import tests pass" in reply, reply
        seen[name] = plan_updates(client, sid)
        assert client.violations == [], client.violations
    [by_id] = seen["plan"]
    assert by_id["sessionUpdate"] == "plan_update" and by_id["plan"]["planId"] == "session"
    assert "make the import tests pass" in by_id["plan"]["entries"][0]["content"]
    assert [u["sessionUpdate"] for u in seen["plain"]] == ["plan"]
    assert seen["plain"][0]["entries"] == by_id["plan"]["entries"]


def test_the_prompt_response_carries_the_turn_usage_only_for_a_client_that_speaks_the_unstable_schema(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    unstable = spawn(model.base_url)
    initialize(unstable, plan={})
    sid, _ = new_session(unstable, tmp_path)
    # Two requests in one turn: a cell, then the answer; their figures add up.
    model.push(
        tool_call("x = 1", usage=usage(1000, 40, cached_tokens=600, cache_write_tokens=100)),
        text("done", usage=usage(1100, 10, cached_tokens=900)),
    )
    assert response_of(unstable, sid, "set x") == {
        "stopReason": "end_turn",
        "usage": {
            "totalTokens": 2150,
            "inputTokens": 600,
            "outputTokens": 50,
            "cachedReadTokens": 1500,
            "cachedWriteTokens": 100,
        },
    }
    # An endpoint that reports no usage (llama.cpp streams): no `usage`, not zeros.
    model.push(response([{"content": "hi"}], omit_usage=True))
    assert response_of(unstable, sid, "hello") == {"stopReason": "end_turn"}
    assert unstable.violations == [], unstable.violations

    plain = spawn(model.base_url)
    initialize(plain)
    plain_sid, _ = new_session(plain, tmp_path)
    model.push(text("done", usage=usage(1000, 40)))
    assert response_of(plain, plain_sid, "hello") == {"stopReason": "end_turn"}


def response_of(client: AcpClient, sid: str, words: str) -> dict[str, Any]:
    frame = client.response_frame(send_prompt(client, sid, words), 60.0)
    assert "result" in frame.message, frame.message
    result: dict[str, Any] = frame.message["result"]
    return result
