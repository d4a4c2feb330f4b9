"""Unstable ACP v1 frames only for clients that advertise them: the plan goes as `plan_update` by id to
a client with `plan`, as the stable `plan` to one without; the prompt response's `usage` only to a
client that speaks the unstable schema; every frame is checked (the unstable ones
against the schema the npm SDK ships)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from acp_client import AcpClient, close_and_check, server_env
from acp_helpers import initialize, new_session, run_command, send_prompt

from agent_core.testing import ScriptedModelServer, response, text, usage

Clients = dict[str, tuple[AcpClient, str]]


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory, model: ScriptedModelServer) -> Iterator[Clients]:
    """One server per kind of client for the module: `plan` advertises the unstable `plan`, `plain`
    nothing; each with one session. At teardown both must have kept stdout clean."""
    base = tmp_path_factory.mktemp("unstable")
    made: Clients = {}
    kinds: tuple[tuple[str, dict[str, object]], ...] = (("plan", {"plan": {}}), ("plain", {}))
    for name, capabilities in kinds:
        home = base / f"home-{name}"
        home.mkdir()
        client = AcpClient(server_env(home, model.base_url), cwd=str(base))
        made[name] = (client, "")
        initialize(client, **capabilities)
        made[name] = (client, new_session(client, base)[0])
    yield made
    problems: list[str] = []
    for client, _ in made.values():
        problems += close_and_check(client)
    assert not problems, "\n".join(problems)


def plan_updates(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if u["sessionUpdate"] in ("plan", "plan_update", "plan_removed")]


def test_a_client_that_advertises_plan_gets_plan_update_by_id_and_one_that_does_not_gets_plan(
    clients: Clients,
) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    for name, (client, sid) in clients.items():
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
    clients: Clients, model: ScriptedModelServer
) -> None:
    unstable, sid = clients["plan"]
    # Two requests in one turn (a call of a tool that does not exist is answered without a kernel,
    # then the answer); their figures add up.
    call = {"tool_call": {"index": 0, "id": "call_1", "name": "shell", "arguments": "{}"}}
    model.push(
        response(
            [call],
            finish_reason="tool_calls",
            usage=usage(1000, 40, cached_tokens=600, cache_write_tokens=100),
        ),
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

    plain, plain_sid = clients["plain"]
    model.push(text("done", usage=usage(1000, 40)))
    assert response_of(plain, plain_sid, "hello") == {"stopReason": "end_turn"}


def response_of(client: AcpClient, sid: str, words: str) -> dict[str, Any]:
    frame = client.response_frame(send_prompt(client, sid, words), 60.0)
    assert "result" in frame.message, frame.message
    result: dict[str, Any] = frame.message["result"]
    return result
