"""Two servers on one data dir: a session is open in one process at a time (sessions/<id>/owner.lock)."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp_client import AcpClient, RpcError
from acp_helpers import ClientFactory, initialize, new_session

from agent_core.testing.scripted_model import ScriptedModelServer


def two_servers(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> tuple[AcpClient, AcpClient, Path]:
    home = tmp_path / "shared-home"
    home.mkdir()
    first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(first)
    initialize(second)
    return first, second, home


def refused(client: AcpClient, method: str, params: dict[str, object]) -> RpcError:
    with pytest.raises(RpcError) as caught:
        client.request(method, params)
    return caught.value


def test_a_session_open_in_another_process_cannot_be_loaded_resumed_or_deleted(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    first, second, home = two_servers(spawn, model, tmp_path)
    sid, _ = new_session(first, str(tmp_path))
    params = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
    expected = (
        f"session {sid} is open in another continual-acp process (pid {first.proc.pid}); close it there first"
    )
    for method in ("session/load", "session/resume"):
        error = refused(second, method, params)
        assert error.message == expected, (method, error.message)
    assert refused(second, "session/delete", {"sessionId": sid}).message == expected
    assert (home / "sessions" / sid / "transcript.jsonl").is_file()

    first.request("session/close", {"sessionId": sid})
    assert second.request("session/resume", params) is not None
    assert refused(first, "session/load", params).message.endswith(
        f"(pid {second.proc.pid}); close it there first"
    )


def test_a_crashed_owner_does_not_keep_its_sessions_locked(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    first, second, home = two_servers(spawn, model, tmp_path)
    sid, _ = new_session(first, str(tmp_path))
    first.proc.kill()
    first.proc.wait(30)
    second.request("session/delete", {"sessionId": sid})
    assert not (home / "sessions" / sid).exists()
