"""A sandbox that is not in force never runs cells silently: every cell is asked, the user is told once,
and `/kernel status` names the backend and its guarantees (real server, real kernel, stdio)."""

from __future__ import annotations

from pathlib import Path

from acp_client import AcpClient, select
from acp_helpers import ClientFactory, initialize, new_session, prompt, run_command

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call


def _unsandboxed(spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path) -> tuple[AcpClient, str]:
    config = tmp_path / "config.toml"
    config.write_text('kernel = "sandbox"\nsandbox_tier = "none"\n')
    client = spawn(model.base_url, CONTINUAL_ACP_CONFIG=str(config))
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    return client, sid


def test_an_unconfined_sandbox_asks_before_every_cell_even_in_auto_mode(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(tool_call("print('ran')", title="probe"), text("done"))
    client, sid = _unsandboxed(spawn, model, tmp_path)
    client.permission_policy = select("reject")
    assert prompt(client, sid, "run a cell").stop_reason == "end_turn"
    asks = [r for r in client.agent_requests if r["method"] == "session/request_permission"]
    assert len(asks) == 1
    tool_results = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    assert "rejected" in tool_results[0]  # not run without consent


def test_the_user_is_told_the_sandbox_is_not_in_force_and_kernel_status_says_so(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(tool_call("print('ran')", title="probe"), text("done"))
    client, sid = _unsandboxed(spawn, model, tmp_path)
    client.permission_policy = select("allow_once")
    assert prompt(client, sid, "run a cell").stop_reason == "end_turn"
    said = "".join(
        u["content"]["text"] for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "not sandboxed" in said
    status = run_command(client, sid, "/kernel status")
    assert "backend sandbox" in status and "NOT sandboxed: every cell needs approval" in status
