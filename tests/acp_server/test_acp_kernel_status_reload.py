"""`/kernel status` after a reload tells the truth about what the snapshot on disk restored."""

from __future__ import annotations

from pathlib import Path

from acp_client import AcpClient, server_env
from acp_helpers import initialize, new_session, prompt, run_command

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call


def spawn_on(home: Path, model: ScriptedModelServer, cwd: Path) -> AcpClient:
    client = AcpClient(server_env(home, model.base_url), cwd=str(cwd))
    initialize(client)
    return client


def reloaded_status(model: ScriptedModelServer, tmp_path: Path) -> str:
    home = tmp_path / "shared-home"
    home.mkdir()
    model.push(tool_call("answer_value = 41 + 1", title="Set it"), text("Set."))
    first = spawn_on(home, model, tmp_path)
    sid, _ = new_session(first, str(tmp_path))
    assert prompt(first, sid, "set a variable")[0] == "end_turn"
    assert first.close() == 0  # the final snapshot is written on the way out
    second = spawn_on(home, model, tmp_path)
    try:
        second.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        # The first status after a load may still see the kernel starting; ask until it is up.
        reply = run_command(second, sid, "/kernel status", timeout=120)
        for _ in range(20):
            if not reply.startswith("starting"):
                break
            reply = run_command(second, sid, "/kernel status", timeout=120)
        return reply
    finally:
        second.close()


def test_kernel_status_after_a_reload_names_the_restored_variables(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    reply = reloaded_status(model, tmp_path)
    assert "no snapshot taken yet" not in reply, reply
    assert "names restored from the snapshot on disk:" in reply and "answer_value" in reply, reply
    assert "cells run since this server opened the session: 0" in reply, reply
