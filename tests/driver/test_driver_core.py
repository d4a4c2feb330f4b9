"""acp_driver's sans-IO core: ids, matching, the answers to the agent's requests, updates, the frame log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_driver import AgentRequest, BadLine, ClientCore, ClientPolicy, Notification, Response, select


def line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def agent_request(method: str, params: dict[str, Any], request_id: Any = 7) -> AgentRequest:
    return AgentRequest({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def reply_to(core: ClientCore, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    reply = core.answer(agent_request(method, params))
    return None if reply is None else json.loads(reply)


def test_responses_arriving_out_of_order_are_matched_to_their_requests_by_exact_id() -> None:
    core = ClientCore()
    first, _ = core.request("initialize", {"protocolVersion": 1})
    second, _ = core.request("session/list", {})
    named, _ = core.request("session/new", {}, request_id="1")  # the string "1" is not the integer 1
    incoming = core.feed(
        line({"jsonrpc": "2.0", "id": second, "result": {"sessions": []}})
        + line({"jsonrpc": "2.0", "id": named, "result": {"sessionId": "s"}})
        + line({"jsonrpc": "2.0", "id": first, "result": {"protocolVersion": 1}})
    )
    assert [(i.request_id, i.method) for i in incoming if isinstance(i, Response)] == [
        (2, "session/list"),
        ("1", "session/new"),
        (1, "initialize"),
    ]
    assert core.pending() == []
    [stray] = core.feed(line({"jsonrpc": "2.0", "id": 99, "result": {}}))
    assert isinstance(stray, Response) and stray.method is None


def test_updates_are_collected_by_session_and_notifications_need_no_answer() -> None:
    core = ClientCore()
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    items = core.feed(
        line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "a", "update": update}})
        + line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "b", "update": {}}})
        + line({"jsonrpc": "2.0", "method": "_harness/quiescence", "params": {}})
    )
    assert all(isinstance(i, Notification) for i in items)
    assert core.session_updates("a") == [update]
    assert len(core.updates) == 2


def test_a_permission_request_is_answered_by_the_policy_s_choice() -> None:
    params = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "t"},
        "options": [
            {"optionId": "yes", "kind": "allow_once", "name": "Allow"},
            {"optionId": "never", "kind": "reject_always", "name": "Never"},
        ],
    }
    default = reply_to(ClientCore(), "session/request_permission", params)
    assert default == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"outcome": {"outcome": "selected", "optionId": "yes"}},
    }
    chosen = reply_to(
        ClientCore(ClientPolicy(permission=select("never"))), "session/request_permission", params
    )
    assert chosen is not None and chosen["result"]["outcome"]["optionId"] == "never"
    nothing_offered = reply_to(ClientCore(), "session/request_permission", {"options": []})
    assert nothing_offered is not None and nothing_offered["result"] == {"outcome": {"outcome": "cancelled"}}


def test_an_unknown_agent_request_is_answered_method_not_found() -> None:
    reply = reply_to(ClientCore(), "terminal/create", {"command": "ls"})
    assert reply is not None and reply["error"]["code"] == -32601 and reply["id"] == 7
    # elicitation is unknown too until the client is given an answer for it
    assert reply_to(ClientCore(), "elicitation/create", {})["error"]["code"] == -32601  # type: ignore[index]
    answering = ClientCore(ClientPolicy(elicitation=lambda params: {"action": "decline"}))
    assert reply_to(answering, "elicitation/create", {}) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"action": "decline"},
    }


def test_fs_reads_and_writes_inside_the_root_and_refuses_outside_it(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("keep out", encoding="utf-8")
    (root / "escape").symlink_to(tmp_path)
    core = ClientCore(ClientPolicy(root=root))

    wrote = reply_to(
        core, "fs/write_text_file", {"sessionId": "s", "path": str(root / "a.txt"), "content": "A"}
    )
    assert wrote == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert (root / "a.txt").read_text(encoding="utf-8") == "A"
    read = reply_to(core, "fs/read_text_file", {"sessionId": "s", "path": str(root / "a.txt")})
    assert read is not None and read["result"] == {"content": "A"}
    missing = reply_to(core, "fs/read_text_file", {"sessionId": "s", "path": str(root / "nope.txt")})
    assert missing is not None and missing["error"]["code"] == -32002

    for path in (str(outside), str(root / "escape" / "secret.txt"), str(root / ".." / "secret.txt"), "a.txt"):
        refused = reply_to(core, "fs/write_text_file", {"sessionId": "s", "path": path, "content": "X"})
        assert refused is not None and refused["error"]["code"] == -32602, path
    assert outside.read_text(encoding="utf-8") == "keep out"
    leaked = reply_to(core, "fs/read_text_file", {"sessionId": "s", "path": str(outside)})
    assert leaked is not None and "error" in leaked


def test_without_a_root_fs_requests_are_method_not_found() -> None:
    reply = reply_to(ClientCore(), "fs/read_text_file", {"sessionId": "s", "path": "/etc/hostname"})
    assert reply is not None and reply["error"]["code"] == -32601


def test_a_policy_that_holds_a_request_sends_nothing_and_one_that_fails_answers_an_internal_error() -> None:
    class Holding(ClientPolicy):
        def request_permission(self, params: dict[str, Any]) -> dict[str, Any] | None:
            return None

    class Broken(ClientPolicy):
        def request_permission(self, params: dict[str, Any]) -> dict[str, Any] | None:
            raise KeyError("options")

    assert ClientCore(Holding()).answer(agent_request("session/request_permission", {})) is None
    broken = reply_to(ClientCore(Broken()), "session/request_permission", {})
    assert broken is not None and broken["error"]["code"] == -32603


def test_the_frame_log_sees_every_message_in_and_out_in_order_and_not_a_bad_line() -> None:
    log: list[tuple[str, Any]] = []
    core = ClientCore(frame_log=lambda direction, message: log.append((direction, message.get("id"))))
    core.request("initialize", {})
    items = core.feed(b"not json\n" + line({"jsonrpc": "2.0", "id": 5, "method": "x/y", "params": {}}))
    assert isinstance(items[0], BadLine)
    assert isinstance(items[1], AgentRequest)
    core.answer(items[1])
    core.feed(line({"jsonrpc": "2.0", "id": 1, "result": {}}))
    assert log == [("out", 1), ("in", 5), ("out", 5), ("in", 1)]


@pytest.mark.parametrize("request_id", [0, "abc", 10**30, None])
def test_an_explicit_request_id_is_sent_as_given(request_id: Any) -> None:
    core = ClientCore()
    sent_id, raw = core.request("initialize", None, request_id=request_id)
    message = json.loads(raw)
    assert message["id"] == sent_id and "params" not in message
    if request_id is not None:
        assert sent_id == request_id
