"""Sessions survive the process: list, load with replay, resume, prompt by id, close, delete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, RpcError, server_env
from acp_helpers import initialize, new_session, prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "shared-home"
    path.mkdir()
    return path


def spawn_on(home: Path, model: ScriptedModelServer, cwd: Path) -> AcpClient:
    client = AcpClient(server_env(home, model.base_url), cwd=str(cwd))
    initialize(client)
    return client


def finish(client: AcpClient) -> None:
    assert client.close() == 0
    assert client.garbage == [], client.garbage
    assert client.violations == [], client.violations


def test_list_load_and_resume_across_a_server_restart(
    model: ScriptedModelServer,
    home: Path,
    tmp_path: Path,
) -> None:
    model.push(tool_call("print('from the first life')", title="Say hello"), text("Hello from before."))
    first = spawn_on(home, model, tmp_path)
    sid, _ = new_session(first, str(tmp_path))
    assert prompt(first, sid, "remember me")[0] == "end_turn"
    listed = first.request("session/list", {"cwd": str(tmp_path)})
    assert [s["sessionId"] for s in listed["sessions"]] == [sid]
    assert listed["sessions"][0]["title"] and listed["sessions"][0]["updatedAt"]
    assert first.request("session/list", {"cwd": str(tmp_path / "elsewhere")})["sessions"] == []
    finish(first)

    second = spawn_on(home, model, tmp_path)
    rid = second.start_request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    response = second.response_frame(rid)
    assert "result" in response.message, response.message
    replay = [f for f in second.update_frames() if f.seq < response.seq]
    kinds = [f.message["params"]["update"]["sessionUpdate"] for f in replay]
    assert "user_message_chunk" in kinds and "agent_message_chunk" in kinds and "tool_call" in kinds
    user_text = "".join(
        f.message["params"]["update"]["content"].get("text", "")
        for f in replay
        if f.message["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    )
    assert "remember me" in user_text
    card = next(
        f.message["params"]["update"]
        for f in replay
        if f.message["params"]["update"]["sessionUpdate"] == "tool_call"
    )
    assert card["title"] == "Say hello"
    advert = second.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
        )
    )
    assert advert.seq > response.seq
    finish(second)

    third = spawn_on(home, model, tmp_path)
    rid = third.start_request("session/resume", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    response = third.response_frame(rid)
    assert "result" in response.message
    assert not [f for f in third.update_frames() if f.seq < response.seq], (
        "resume must not replay the transcript"
    )
    finish(third)


def test_prompt_for_a_session_that_exists_only_on_disk_reloads_it(
    model: ScriptedModelServer,
    home: Path,
    tmp_path: Path,
) -> None:
    model.push(text("first answer"), tool_call("print('kernel back')"), text("second answer"))
    first = spawn_on(home, model, tmp_path)
    sid, _ = new_session(first, str(tmp_path))
    assert prompt(first, sid, "one")[0] == "end_turn"
    finish(first)

    second = spawn_on(home, model, tmp_path)
    assert prompt(second, sid, "two")[0] == "end_turn"
    chunks = [
        u["content"]["text"] for u in second.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "".join(chunks) == "second answer"
    finish(second)


def test_close_frees_the_session_and_delete_removes_it_idempotently(
    model: ScriptedModelServer,
    home: Path,
    tmp_path: Path,
) -> None:
    client = spawn_on(home, model, tmp_path)
    sid, _ = new_session(client, str(tmp_path))
    assert client.request("session/close", {"sessionId": sid}) == {}
    assert [s["sessionId"] for s in client.request("session/list", {})["sessions"]] == [sid]
    assert client.request("session/delete", {"sessionId": sid}) == {}
    assert client.request("session/delete", {"sessionId": sid}) == {}
    assert client.request("session/delete", {"sessionId": "never-existed"}) == {}
    assert client.request("session/list", {})["sessions"] == []
    with pytest.raises(RpcError) as info:
        client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert info.value.code == -32002
    finish(client)


def test_list_pages_with_a_cursor(model: ScriptedModelServer, home: Path, tmp_path: Path) -> None:
    client = spawn_on(home, model, tmp_path)
    ids = {new_session(client, str(tmp_path))[0] for _ in range(3)}
    seen: list[str] = []
    cursor: Any = None
    for _ in range(5):
        page = client.request(
            "session/list", {"cwd": str(tmp_path), **({"cursor": cursor} if cursor else {})}
        )
        seen += [s["sessionId"] for s in page["sessions"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert set(seen) == ids and len(seen) == 3
    with pytest.raises(RpcError) as info:
        client.request("session/list", {"cursor": "not-a-cursor"})
    assert info.value.code == -32602
    finish(client)
