"""Slash-command arguments and config answers found by QA: each says what happened and what is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp_client import AcpClient, RpcError, select
from acp_helpers import ClientFactory, initialize, new_session, run_command

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call


def permission_requests(client: AcpClient) -> list[dict[str, object]]:
    return [r for r in client.agent_requests if r["method"] == "session/request_permission"]


# ---------------------------------------------------------------- /harness <kind|query>


def test_harness_command_filters_by_kind_and_searches_text(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    cell = (
        "harness.create('memory', 'Test command', 'Run make check first.')\n"
        "harness.create('prompt', 'Tone', 'Answer in short sentences.')\n"
    )
    model.push(tool_call(cell, title="Remember two things"), text("noted"))
    run_command(client, sid, "remember")
    memories = run_command(client, sid, "/harness memories")
    assert "Test command" in memories and "Tone" not in memories
    notes = run_command(client, sid, "/harness prompt")
    assert "Tone" in notes and "Test command" not in notes
    found = run_command(client, sid, "/harness make check")
    assert "Test command" in found and "Tone" not in found
    nothing = run_command(client, sid, "/harness zebra")
    assert "no entry matching 'zebra'" in nothing
    assert "no subagent entries" in run_command(client, sid, "/harness subagents")


# ---------------------------------------------------------------- argument validation


def test_history_and_undo_reject_bad_arguments_with_usage(session: tuple[AcpClient, str]) -> None:
    client, sid = session
    for line in ("/history 0", "/history -3", "/history lots"):
        assert "Usage: `/history [N]`" in run_command(client, sid, line), line
    reply = run_command(client, sid, "/undo extra-arg")
    assert "Usage: `/undo`" in reply and "Nothing to undo" not in reply


def test_compact_with_nothing_to_compact_does_not_claim_it_compacted(session: tuple[AcpClient, str]) -> None:
    client, sid = session
    reply = run_command(client, sid, "/compact")
    assert reply.startswith("Nothing to compact") and "Context compacted" not in reply


# ---------------------------------------------------------------- allow always can be revoked


@pytest.mark.parametrize("how", ["set_mode", "set_config_option"])
def test_reselecting_ask_mode_revokes_allow_always(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path, how: str
) -> None:
    client = spawn(model.base_url, CONTINUAL_ACP_MODE="ask")
    initialize(client)
    sid, setup = new_session(client, str(tmp_path))
    ask = next(o for o in setup["configOptions"][0]["options"] if o["value"] == "ask")
    assert "revokes" in ask["description"]
    client.permission_policy = select("allow_always")
    model.push(tool_call("print(1)", title="one"), text("ok"), tool_call("print(2)", title="two"), text("ok"))
    run_command(client, sid, "first")
    assert len(permission_requests(client)) == 1
    if how == "set_mode":
        client.request("session/set_mode", {"sessionId": sid, "modeId": "ask"})
    else:
        client.request("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "ask"})
    run_command(client, sid, "second")
    assert len(permission_requests(client)) == 2


# ---------------------------------------------------------------- config, resume, permission errors


def test_set_config_option_error_lists_exactly_the_advertised_options(session: tuple[AcpClient, str]) -> None:
    client, sid = session
    with pytest.raises(RpcError) as caught:
        client.request(
            "session/set_config_option", {"sessionId": sid, "configId": "max_turn_requests", "value": "3"}
        )
    message = caught.value.message
    assert caught.value.code == -32602
    assert message.endswith("options: mode, model, refine_review, wait_for_refinement"), message


def test_resume_rejects_a_cwd_that_does_not_exist(session: tuple[AcpClient, str], tmp_path: Path) -> None:
    client, sid = session
    with pytest.raises(RpcError) as caught:
        client.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path / "gone"), "mcpServers": []})
    assert caught.value.code == -32602
    assert "not an existing directory" in caught.value.message


def test_permission_request_failed_by_the_client_is_not_reported_as_a_rejection(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url, CONTINUAL_ACP_MODE="ask")
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    client.hold_permissions = True
    model.push(tool_call("print('never')", title="one"), text("ok"))
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    )
    asked = client.wait_for(lambda m: m.get("method") == "session/request_permission").message
    client.send({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32603, "message": "dialog crashed"}})
    assert client.result(rid)["stopReason"] == "end_turn"
    finals = [u for u in client.updates(sid) if u.get("status") == "failed"]
    assert finals, client.updates(sid)
    shown = str(finals[-1])
    assert "the client failed to answer the permission request: dialog crashed" in shown
    assert "rejected by the user" not in shown
    assert "dialog crashed" in str(model.requests[-1]["messages"][-1])
