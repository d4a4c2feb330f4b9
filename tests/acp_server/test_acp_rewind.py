"""Rewind, fork and steer through a real server: `/rewind`, `/rewind list`, `_session/rewind`, the
kernel's variables, the refinements made since (offered, never rolled back silently), workspace files
in git; `session/fork` and `/fork`; `_session/steer` and `while_busy = "steer"`.

One server (configured with `while_busy = "steer"`) and one scripted endpoint for the module; each
test opens its own session.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, RpcError, close_and_check, select, server_env
from acp_helpers import initialize, new_session, prompt, run_command, send_prompt

from agent_core.testing.scripted_model import ScriptedModelServer, response, text, tool_call

PROBE = "print(sorted(n for n in ('x', 'y', 'z') if n in globals()))"


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, model: ScriptedModelServer) -> Iterator[AcpClient]:
    home = tmp_path_factory.mktemp("rewind-home")
    config = home / "config.toml"
    config.write_text('auto_refine_every = 0\nwhile_busy = "steer"\n', encoding="utf-8")
    started = AcpClient(server_env(home, model.base_url, CONTINUAL_ACP_CONFIG=str(config)), cwd=str(home))
    initialize(started)
    yield started
    problems = close_and_check(started)
    assert not problems, "\n".join(problems)


def run_cell_prompt(client: AcpClient, model: ScriptedModelServer, sid: str, words: str, code: str) -> None:
    model.push(tool_call(code), text("done"))
    assert prompt(client, sid, words).stop_reason == "end_turn"


def probe(client: AcpClient, model: ScriptedModelServer, sid: str) -> str:
    """Which of x, y, z the kernel holds (a prompt whose cell prints them)."""
    model.push(tool_call(PROBE), text("probed"))
    assert prompt(client, sid, "which names are there?").stop_reason == "end_turn"
    return str(model.requests[-1]["messages"][-1]["content"])


def three_prompts(client: AcpClient, model: ScriptedModelServer, cwd: Path) -> str:
    sid, _ = new_session(client, cwd)
    run_cell_prompt(client, model, sid, "first: set x", "x = 1")
    run_cell_prompt(client, model, sid, "second: set y", "y = 2")
    run_cell_prompt(client, model, sid, "third: set z", "z = 3")
    return sid


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]).split("\n")[0] for m in messages if m["role"] == "user"]


def test_rewind_one_prompt_drops_its_variable_its_messages_and_keeps_the_cut_part(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid = three_prompts(client, model, tmp_path)
    reply = run_command(client, sid, "/rewind")
    assert reply.startswith("Rewound 1 prompt(s): the conversation is back to before prompt 3."), reply
    assert "removed (defined later): z" in reply, reply
    assert "['x', 'y']" in probe(client, model, sid)
    # The model no longer sees the third prompt; the probe follows the second.
    assert user_texts(model.requests[-1]["messages"])[:3] == [
        "first: set x",
        "second: set y",
        "which names are there?",
    ]
    listed = run_command(client, sid, "/rewind list")
    assert "third: set z" in listed and "prompt3.jsonl" in listed, listed


def test_session_rewind_method_goes_back_two_prompts_and_a_reload_replays_the_cut_history(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid = three_prompts(client, model, tmp_path)
    result = client.request("_session/rewind", {"sessionId": sid, "turns": 2})
    assert result["rewound"] is True and result["turn"] == 2 and result["prompts"] == 2
    assert sorted(result["kernel"]["removed"]) == ["y", "z"]
    assert Path(result["cutTranscript"]).is_file()
    seen = len(client.frames)
    client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    replayed = [
        f.message["params"]["update"]["content"]["text"]
        for f in client.frames[seen:]
        if f.message.get("method") == "session/update"
        and f.message["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]
    assert replayed == ["first: set x"], replayed
    assert "['x']" in probe(client, model, sid)


def test_session_rewind_refuses_bad_params_and_a_session_without_checkpoints(
    client: AcpClient, tmp_path: Path
) -> None:
    sid, _ = new_session(client, tmp_path)
    for params, words in (
        ({"sessionId": sid, "turns": 0}, "turns: must be an integer >= 1"),
        ({"sessionId": sid, "turns": 1, "messageId": "m"}, "give turns or messageId, not both"),
        ({"sessionId": sid, "files": "yes"}, "files: must be true or false"),
        ({"sessionId": sid}, "no checkpoints yet"),
    ):
        with pytest.raises(RpcError) as caught:
            client.request("_session/rewind", params)
        assert caught.value.code == -32602 and words in str(caught.value.message), caught.value


def test_initialize_advertises_session_rewind_and_kernel_status_shows_the_checkpoint_bounds(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    answer = client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert "_session/rewind" in answer["agentCapabilities"]["_meta"]["continual-acp"]["methods"]
    sid, _ = new_session(client, tmp_path)
    run_cell_prompt(client, model, sid, "set x", "x = 1")
    status = run_command(client, sid, "/kernel status")
    assert "checkpoints: 1 kept (prompts 1-1)" in status, status
    assert "checkpoint_max_count = 100" in status and "checkpoint_max_bytes = 1074 MB" in status, status


def test_rewind_offers_the_refinements_made_since_and_rolls_them_back_only_when_told(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid, _ = new_session(client, tmp_path)
    run_cell_prompt(client, model, sid, "set x", "x = 1")
    run_cell_prompt(
        client, model, sid, "remember it", "harness.create('memory', 'Rewind probe', 'Checks run with make.')"
    )
    asked = len(client.agent_requests)
    client.permission_policy = select("rollback")
    try:
        reply = run_command(client, sid, "/rewind")
    finally:
        client.permission_policy = select("allow_once")
    questions = [r for r in client.agent_requests[asked:] if r["method"] == "session/request_permission"]
    assert len(questions) == 1
    card = questions[0]["params"]["toolCall"]
    assert card["title"] == "Also roll back the 1 refinement(s) made since that point?", card
    assert "Rolled back: " in reply and "none" not in reply.split("Rolled back: ")[1], reply
    state = client.request("_harness/state", {"sessionId": sid, "scope": "local"})
    assert "Rewind probe" not in json.dumps(state)


def test_rewind_with_files_shows_the_diff_asks_and_reverts_tracked_files_in_git(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    notes = repo / "notes.txt"
    notes.write_text("before\n", encoding="utf-8")
    for args in (
        ["init", "-q"],
        ["add", "notes.txt"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    sid, _ = new_session(client, repo)
    run_cell_prompt(client, model, sid, "edit notes", "open('notes.txt', 'w').write('after\\n')")
    asked = len(client.agent_requests)
    client.permission_policy = select("keep")
    try:
        refused = run_command(client, sid, "/rewind 1 --files")
    finally:
        client.permission_policy = select("allow_once")
    assert refused == "Nothing rewound: the file revert was not accepted.", refused
    assert notes.read_text(encoding="utf-8") == "after\n"
    question = next(r for r in client.agent_requests[asked:] if r["method"] == "session/request_permission")
    assert "-before" in json.dumps(question["params"]["toolCall"]["content"])
    client.permission_policy = select("revert")
    try:
        reply = run_command(client, sid, "/rewind 1 --files")
    finally:
        client.permission_policy = select("allow_once")
    assert "Reverted 1 file(s)" in reply, reply
    assert notes.read_text(encoding="utf-8") == "before\n"


def replayed_prompts(client: AcpClient, sid: str, cwd: Path) -> list[str]:
    seen = len(client.frames)
    client.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})
    return [
        f.message["params"]["update"]["content"]["text"]
        for f in client.frames[seen:]
        if f.message.get("method") == "session/update"
        and f.message["params"]["sessionId"] == sid
        and f.message["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]


def test_session_fork_before_a_prompt_gets_that_state_works_at_once_and_is_independent(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    source = three_prompts(client, model, tmp_path)
    answer = client.request(
        "session/fork",
        {
            "sessionId": source,
            "cwd": str(tmp_path),
            "mcpServers": [],
            "_meta": {"continual-acp": {"beforePrompt": 1}},
        },
    )
    fork = answer["sessionId"]
    assert fork != source and answer["_meta"]["continual-acp"]["forkedFrom"] == source
    assert answer["_meta"]["continual-acp"]["kernel"] == "kernel variables from before that prompt: x, y"
    assert "['x', 'y']" in probe(client, model, fork)  # the returned id takes a prompt at once
    assert user_texts(model.requests[-1]["messages"])[:3] == [
        "first: set x",
        "second: set y",
        "which names are there?",
    ]
    run_cell_prompt(client, model, fork, "change y in the fork", "y = 100")
    model.push(tool_call("print('y is', y)"), text("read"))
    assert prompt(client, source, "read y").stop_reason == "end_turn"
    assert "y is 2" in str(model.requests[-1]["messages"][-1]["content"])
    assert replayed_prompts(client, fork, tmp_path)[:2] == ["first: set x", "second: set y"]


def test_fork_command_now_carries_every_variable_and_the_fork_can_be_rewound(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    source = three_prompts(client, model, tmp_path)
    reply = run_command(client, source, "/fork")
    assert reply.startswith("Forked this session as it is now into `sess_"), reply
    fork = reply.split("`")[1]
    assert "kernel variables as they are now: x, y, z" in reply, reply
    assert "['x', 'y', 'z']" in probe(client, model, fork)
    rewound = client.request("_session/rewind", {"sessionId": fork, "turns": 2})
    assert rewound["turn"] == 3 and "z" in rewound["kernel"]["removed"], rewound
    assert "['x', 'y']" in probe(client, model, fork)


def wait_for_log(client: AcpClient, line: str, count: int, timeout: float = 30.0) -> None:
    """Until the server's log (stderr) holds `line` `count` times: the server took the request."""
    deadline = time.monotonic() + timeout
    while client.stderr().count(line) < count:
        assert time.monotonic() < deadline, f"not logged within {timeout} s: {line}"
        threading.Event().wait(0.02)


def held_answer(name: str) -> object:
    """A text answer that stops halfway until the test releases `name` (the turn is running then)."""
    return response([{"content": "thinking "}, {"hold": name}, {"content": "done"}])


def steering_updates(client: AcpClient, sid: str) -> list[int]:
    return [
        f.seq
        for f in client.frames
        if f.message.get("method") == "session/update"
        and f.message["params"]["sessionId"] == sid
        and f.message["params"]["update"]["sessionUpdate"] == "user_message_chunk"
        and str(f.message["params"]["update"].get("messageId", "")).startswith("steer_")
    ]


def test_session_steer_joins_the_running_turn_at_its_next_request_and_a_reload_replays_it_in_order(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid, _ = new_session(client, tmp_path)
    model.push(held_answer("steer-method"), text("heard you"))
    before = len(model.requests)
    turn = send_prompt(client, sid, "write a long answer")
    model.wait_for_requests(before + 1)
    steer = client.start_request(
        "_session/steer", {"sessionId": sid, "prompt": [{"type": "text", "text": "also mention the tests"}]}
    )
    wait_for_log(client, f"session {sid}: a steering message waits for the next model request", 1)
    model.release("steer-method")
    assert client.result(steer) == {"entered": True}
    ended = client.response_frame(turn)
    assert ended.message["result"]["stopReason"] == "end_turn"
    assert len(model.requests) == before + 2  # the answer that ended, then one more with the steering
    messages = model.requests[-1]["messages"]
    assert [m["role"] for m in messages[-3:]] == ["user", "assistant", "user"]
    assert messages[-1]["content"] == "also mention the tests"
    shown = steering_updates(client, sid)
    assert len(shown) == 1 and shown[0] < ended.seq  # shown where it entered, inside the turn
    assert replayed_prompts(client, sid, tmp_path) == ["write a long answer", "also mention the tests"]


def test_a_prompt_sent_during_a_turn_steers_it_with_while_busy_steer(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid, _ = new_session(client, tmp_path)
    model.push(held_answer("steer-prompt"), text("both answered"))
    before = len(model.requests)
    first = send_prompt(client, sid, "start something")
    model.wait_for_requests(before + 1)
    second = send_prompt(client, sid, "and one more thing")
    wait_for_log(client, f"session {sid}: a steering message waits for the next model request", 1)
    model.release("steer-prompt")
    assert client.result(first)["stopReason"] == "end_turn"
    assert client.result(second)["stopReason"] == "end_turn"
    assert len(model.requests) == before + 2  # one turn: no third request for the second prompt
    assert model.requests[-1]["messages"][-1]["content"] == "and one more thing"


def test_session_steer_without_a_running_turn_is_refused(client: AcpClient, tmp_path: Path) -> None:
    sid, _ = new_session(client, tmp_path)
    with pytest.raises(RpcError) as caught:
        client.request("_session/steer", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert caught.value.code == -32602 and "no turn is running" in str(caught.value.message)


def test_session_status_says_open_or_saved_and_set_title_renames_the_session(
    client: AcpClient, tmp_path: Path
) -> None:
    sid, _ = new_session(client, tmp_path)
    assert client.request("session/status", {"sessionId": sid}) == {"status": "open"}
    seen = len(client.frames)
    assert client.request("session/set_title", {"sessionId": sid, "title": "  Rewind   notes "}) == {}
    titles = [
        f.message["params"]["update"].get("title")
        for f in client.frames[seen:]
        if f.message.get("method") == "session/update"
        and f.message["params"]["update"]["sessionUpdate"] == "session_info_update"
    ]
    assert titles == ["Rewind notes"]
    listed = client.request("session/list", {"cwd": str(tmp_path)})["sessions"]
    assert [s["title"] for s in listed if s["sessionId"] == sid] == ["Rewind notes"]
    client.request("session/close", {"sessionId": sid})
    assert client.request("session/status", {"sessionId": sid}) == {"status": "saved"}
    with pytest.raises(RpcError) as unknown:
        client.request("session/status", {"sessionId": "sess_nothing_here"})
    assert unknown.value.code == -32002
    with pytest.raises(RpcError) as empty:
        client.request("session/set_title", {"sessionId": sid, "title": " "})
    assert empty.value.code == -32602
    # Control and bidirectional override characters are dropped; a title of nothing else is empty.
    assert client.request("session/set_title", {"sessionId": sid, "title": "a\x00b\u202e\x1b[1mc\x85d"}) == {}
    listed = client.request("session/list", {"cwd": str(tmp_path)})["sessions"]
    assert [s["title"] for s in listed if s["sessionId"] == sid] == ["ab[1mc d"]
    with pytest.raises(RpcError) as unprintable:
        client.request("session/set_title", {"sessionId": sid, "title": "\x00\u202e\x1b"})
    assert unprintable.value.code == -32602


def test_session_rewind_by_message_id_goes_back_to_before_that_replayed_prompt(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid = three_prompts(client, model, tmp_path)
    seen = len(client.frames)
    client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    ids = [
        f.message["params"]["update"]["messageId"]
        for f in client.frames[seen:]
        if f.message.get("method") == "session/update"
        and f.message["params"]["sessionId"] == sid
        and f.message["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]
    assert len(ids) == 3
    result = client.request("_session/rewind", {"sessionId": sid, "messageId": ids[1]})
    assert result["turn"] == 2 and sorted(result["kernel"]["removed"]) == ["y", "z"], result
    with pytest.raises(RpcError) as gone:
        client.request("_session/rewind", {"sessionId": sid, "messageId": ids[2]})
    assert gone.value.code == -32602 and "no checkpoint for message" in str(gone.value.message)


def _replayed_user_ids(client: AcpClient, sid: str, cwd: Path) -> list[str]:
    seen = len(client.frames)
    client.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})
    return [
        f.message["params"]["update"]["messageId"]
        for f in client.frames[seen:]
        if f.message.get("method") == "session/update"
        and f.message["params"]["sessionId"] == sid
        and f.message["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]


def _fingerprint(text: str) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_the_anchored_rewind_shape_goes_back_to_before_the_named_message_and_restores_the_kernel(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid = three_prompts(client, model, tmp_path)
    ids = _replayed_user_ids(client, sid, tmp_path)
    assert len(ids) == 3
    result = client.request(
        "_session/rewind",
        {
            "sessionId": sid,
            "beforeMessage": {"messageId": ids[1], "messageFingerprint": _fingerprint("second: set y")},
            "resumeAtMessage": {"messageId": "whatever the client kept"},
        },
    )
    assert result == {"rewound": True}
    assert probe(client, model, sid).strip() == "['x']"  # y and z were defined by the prompts rewound
    assert user_texts(model.requests[-1]["messages"])[:2] == ["first: set x", "which names are there?"]


def test_the_anchored_shape_finds_a_message_by_fingerprint_and_occurrence_when_its_id_is_unknown(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid, _ = new_session(client, tmp_path)
    run_cell_prompt(client, model, sid, "again", "x = 1")
    run_cell_prompt(client, model, sid, "again", "y = 2")
    run_cell_prompt(client, model, sid, "again", "z = 3")
    result = client.request(
        "_session/rewind",
        {
            "sessionId": sid,
            "beforeMessage": {
                "messageId": "id-from-another-client",
                "messageFingerprint": _fingerprint("again"),
                "messageOccurrence": 3,
            },
        },
    )
    assert result == {"rewound": True}
    assert probe(client, model, sid).strip() == "['x', 'y']"


def test_an_anchored_id_whose_text_does_not_match_its_fingerprint_selects_nothing(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid = three_prompts(client, model, tmp_path)
    ids = _replayed_user_ids(client, sid, tmp_path)
    with pytest.raises(RpcError) as missed:
        client.request(
            "_session/rewind",
            {
                "sessionId": sid,
                "beforeMessage": {"messageId": ids[0], "messageFingerprint": _fingerprint("never sent")},
            },
        )
    assert missed.value.code == -32602 and "was not found" in str(missed.value.message)
    assert probe(client, model, sid).strip() == "['x', 'y', 'z']"  # nothing rewound


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"beforeMessage": "m1"}, "beforeMessage: must be an object"),
        ({"beforeMessage": {}}, "beforeMessage.messageId: must be a non-empty string"),
        ({"beforeMessage": {"messageId": "m", "messageFingerprint": "md5:x"}}, "messageFingerprint"),
        (
            {"beforeMessage": {"messageId": "m", "messageOccurrence": 0}},
            "messageOccurrence: must be an integer",
        ),
        ({"beforeMessage": {"messageId": "m"}, "turns": 1}, "two shapes of this method"),
    ],
)
def test_a_malformed_anchored_rewind_is_refused_naming_the_field(
    client: AcpClient, tmp_path: Path, params: dict[str, Any], problem: str
) -> None:
    sid, _ = new_session(client, tmp_path)
    with pytest.raises(RpcError) as caught:
        client.request("_session/rewind", {"sessionId": sid, **params})
    assert caught.value.code == -32602 and problem in str(caught.value.message)


def test_an_anchored_rewind_during_a_prompt_answers_not_rewound(
    client: AcpClient, model: ScriptedModelServer, tmp_path: Path
) -> None:
    sid, _ = new_session(client, tmp_path)
    run_cell_prompt(client, model, sid, "first", "x = 1")
    model.push(held_answer("anchored-busy"))
    before = len(model.requests)
    turn = send_prompt(client, sid, "a long one")
    model.wait_for_requests(before + 1)
    answer = client.request("_session/rewind", {"sessionId": sid, "beforeMessage": {"messageId": "anything"}})
    assert answer == {"rewound": False}
    model.release("anchored-busy")
    assert client.result(turn)["stopReason"] == "end_turn"
