"""Clear errors instead of -32603 or a later failure, over real stdio."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from defect_support import AcpClient, RpcError, new_session, prompt, served

from agent_core import AgentConfig
from agent_core.errors import ModelError
from agent_core.model import ModelClient
from agent_core.testing.scripted_model import ScriptedModelServer, error, response

LONG_ID = "s" * 300

# Every method that takes a sessionId, with the rest of its params.
SESSION_METHODS: list[tuple[str, dict[str, Any]]] = [
    ("session/load", {"cwd": "{cwd}", "mcpServers": []}),
    ("session/resume", {"cwd": "{cwd}", "mcpServers": []}),
    ("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}),
    ("session/set_mode", {"modeId": "ask"}),
    ("session/set_config_option", {"configId": "mode", "value": "ask"}),
    ("session/close", {}),
    ("session/delete", {}),
    ("_harness/state", {}),
    ("_harness/history", {}),
    ("_harness/status", {}),
    ("_harness/show", {"refinementId": "r-1"}),
    ("_harness/rollback", {"refinementId": "r-1"}),
    ("_harness/review", {"proposalId": "p-1", "decision": "apply"}),
    ("_harness/await_quiescence", {"timeoutMs": 100}),
]


def _call(client: AcpClient, method: str, session_id: str, extra: dict[str, Any], cwd: Path) -> Any:
    params = {k: (str(cwd) if v == "{cwd}" else v) for k, v in extra.items()}
    return client.request(method, {"sessionId": session_id, **params})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("errors")
    with served(tmp / "home", tmp) as client:
        yield client, tmp


@pytest.mark.parametrize(
    ("method", "extra"),
    [m for m in SESSION_METHODS if m[0] != "session/delete"],
    ids=[m for m, _ in SESSION_METHODS if m != "session/delete"],
)
def test_a_300_character_session_id_is_an_unknown_session_never_an_internal_error(
    server: Any, method: str, extra: dict[str, Any]
) -> None:
    client, cwd = server
    with pytest.raises(RpcError) as refused:
        _call(client, method, LONG_ID, extra, cwd)
    assert (refused.value.code, str(refused.value.message).startswith("Unknown session")) == (-32002, True)


def test_deleting_a_300_character_session_id_is_an_idempotent_no_op(server: Any) -> None:
    client, _ = server
    assert client.request("session/delete", {"sessionId": LONG_ID}) == {}


def test_a_5000_character_cwd_is_blamed_on_the_cwd_not_the_data_dir(server: Any) -> None:
    client, _ = server
    with pytest.raises(RpcError) as refused:
        client.request("session/new", {"cwd": "/" + "d" * 5000, "mcpServers": []})
    assert refused.value.code == -32602 and "cwd" in refused.value.message
    assert "data dir" not in refused.value.message


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_session_load_refuses_a_cwd_that_is_not_a_directory_like_resume(server: Any, kind: str) -> None:
    client, cwd = server
    sid, _ = new_session(client, str(cwd))
    client.request("session/close", {"sessionId": sid})
    target = cwd / f"not-a-dir-{kind.replace(' ', '-')}"
    if kind == "a file":
        target.write_text("x", encoding="utf-8")
    with pytest.raises(RpcError) as refused:
        client.request("session/load", {"sessionId": sid, "cwd": str(target), "mcpServers": []})
    assert refused.value.code == -32602 and "not an existing directory" in refused.value.message


def test_a_damaged_transcript_header_is_reported_as_damaged_with_its_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with served(home, tmp_path) as client:
        sid, _ = new_session(client, str(tmp_path))
    transcript = home / "sessions" / sid / "transcript.jsonl"
    lines = transcript.read_text(encoding="utf-8").splitlines()
    transcript.write_text("\n".join(['{"type": "head', *lines[1:]]) + "\n", encoding="utf-8")
    with served(home, tmp_path) as client:
        with pytest.raises(RpcError) as refused:
            client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    assert refused.value.code == -32602
    assert "damaged" in refused.value.message and str(transcript) in refused.value.message


def test_a_model_stream_cut_before_its_finish_reason_is_an_error_the_user_sees_with_the_partial_text(
    tmp_path: Path,
) -> None:
    with ScriptedModelServer([response([{"content": "partial ans"}], finish_reason=None)]) as model:
        with served(tmp_path / "home", tmp_path, model.base_url) as client:
            sid, _ = new_session(client, str(tmp_path))
            with pytest.raises(RpcError) as failed:
                prompt(client, sid, "answer me")
            shown = "".join(
                u["content"]["text"]
                for u in client.updates(sid)
                if u["sessionUpdate"] == "agent_message_chunk"
            )
    assert "no finish reason" in str(failed.value.message) and shown == "partial ans"


def test_a_retry_after_beyond_the_retry_budget_is_reported_with_its_value(tmp_path: Path) -> None:
    async def ask(base_url: str) -> None:
        client = ModelClient(AgentConfig(home=tmp_path, model="m", base_url=base_url, max_retries=1))
        try:
            await client.complete([{"role": "user", "content": "hi"}])
        finally:
            await client.aclose()

    with ScriptedModelServer([error(429, "slow down", retry_after_ms=300_000)] * 2) as model:
        with pytest.raises(ModelError) as failed:
            asyncio.run(ask(model.base_url))
    assert "asked to wait 300 s (Retry-After)" in failed.value.message


def test_a_wrong_typed_setting_at_server_start_is_named_in_the_error_every_request_gets(
    tmp_path: Path,
) -> None:
    with served(tmp_path / "home", tmp_path, CONTINUAL_ACP_CONTEXT_WINDOW="big") as client:
        with pytest.raises(RpcError) as refused:
            client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        log = client.stderr()
    assert "setting context_window = 'big'" in str(refused.value.message)
    assert "CONTINUAL_ACP_CONTEXT_WINDOW" in log
