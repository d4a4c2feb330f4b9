"""The transport over real stdio: bad input is answered, nothing breaks, EOF exits 0."""

from __future__ import annotations

import json

import pytest
from acp_client import AcpClient, RpcError
from acp_helpers import ClientFactory, initialize


def _next_error(client: AcpClient, line: bytes) -> dict[str, object]:
    seen = len(client.frames)
    client.send_raw(line)
    frame = client.wait_for_after(seen, lambda m: "error" in m and "method" not in m)
    error = frame.message["error"]
    assert isinstance(error, dict)
    return error


def test_initialize_advertises_exactly_the_documented_capabilities(spawn: ClientFactory) -> None:
    client = spawn()
    result = initialize(client)
    assert result["protocolVersion"] == 1
    # A client without `auth.terminal` gets the setup method as an `agent` method (see test_acp_setup.py).
    assert [(m["id"], m.get("type")) for m in result["authMethods"]] == [("continual-acp-setup", None)]  # type: ignore[union-attr,index]
    assert result["agentInfo"]["name"] == "continual-acp"  # type: ignore[index]
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True  # type: ignore[index]
    assert caps["promptCapabilities"] == {"image": True, "audio": False, "embeddedContext": True}  # type: ignore[index]
    assert caps["sessionCapabilities"] == {  # type: ignore[index]
        "list": {},
        "resume": {},
        "close": {},
        "delete": {},
        "fork": {},
        "status": {},
        "title": {},
        "systemPrompt": {"mode": {"override": {}}},
    }
    meta = caps["_meta"]["continual-acp"]  # type: ignore[index]
    assert meta["version"] == 1
    assert all(name.startswith(("_harness/", "_session/")) for name in meta["methods"])


def test_initialize_with_a_bad_protocol_version_answers_invalid_params(spawn: ClientFactory) -> None:
    client = spawn()
    with pytest.raises(RpcError) as info:
        client.request("initialize", {"protocolVersion": "one"})
    assert info.value.code == -32602
    assert info.value.data["errors"][0]["loc"] == ["protocolVersion"]


def test_invalid_json_answers_parse_error_with_null_id(spawn: ClientFactory) -> None:
    client = spawn()
    error = _next_error(client, b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    assert error["code"] == -32700
    assert client.frames[-1].message["id"] is None


def test_batches_and_non_objects_answer_invalid_request(spawn: ClientFactory) -> None:
    client = spawn()
    batch = json.dumps(
        [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}]
    )
    assert _next_error(client, batch.encode() + b"\n")["code"] == -32600
    assert _next_error(client, b"42\n")["code"] == -32600
    assert _next_error(client, b'"text"\n')["code"] == -32600
    assert _next_error(client, b'{"jsonrpc": "1.0", "id": 7, "method": "initialize"}\n')["code"] == -32600


def test_unknown_methods_and_session_set_model_answer_method_not_found(spawn: ClientFactory) -> None:
    client = spawn()
    for method in ("session/set_model", "no/such/method", "_harness/unknown", "logout"):
        with pytest.raises(RpcError) as info:
            client.request(method, {"sessionId": "x", "modelId": "y"})
        assert info.value.code == -32601, method


def test_missing_or_wrong_params_answer_invalid_params_with_validation_errors(spawn: ClientFactory) -> None:
    client = spawn()
    initialize(client)
    with pytest.raises(RpcError) as info:
        client.request("session/new", {})
    assert info.value.code == -32602
    locs = [error["loc"] for error in info.value.data["errors"]]
    assert ["cwd"] in locs
    with pytest.raises(RpcError) as info:
        client.request("session/prompt", {"sessionId": "s", "prompt": [{"type": "bogus"}]})
    assert info.value.code == -32602
    with pytest.raises(RpcError) as info:
        client.request("session/new", ["positional", "params"])
    assert info.value.code == -32602


def test_unknown_notifications_are_ignored_and_the_server_keeps_answering(spawn: ClientFactory) -> None:
    client = spawn()
    client.notify("_vendor/ping", {"x": 1})
    client.notify("no/such/notification", {})
    result = initialize(client)
    assert result["protocolVersion"] == 1
    responses = [f for f in client.frames if "method" not in f.message]
    assert len(responses) == 1  # only the initialize answer: notifications are never answered


def test_oversized_line_is_rejected_without_killing_the_server(spawn: ClientFactory) -> None:
    client = spawn(CONTINUAL_ACP_MAX_MESSAGE_BYTES="4096")
    huge = json.dumps({"jsonrpc": "2.0", "id": 901, "method": "initialize", "params": {"pad": "x" * 100_000}})
    error = _next_error(client, huge.encode() + b"\n")
    assert error["code"] == -32600
    assert "exceeds the 4096-byte limit (CONTINUAL_ACP_MAX_MESSAGE_BYTES)" in str(error["message"])
    assert client.frames[-1].message["id"] == 901  # read from the line's head: the sender stops waiting
    assert initialize(client)["protocolVersion"] == 1


def test_an_oversized_request_is_answered_with_its_string_id_and_one_without_a_readable_id_with_null(
    spawn: ClientFactory,
) -> None:
    client = spawn(CONTINUAL_ACP_MAX_MESSAGE_BYTES="4096")
    pad = "x" * 20_000
    named = json.dumps({"jsonrpc": "2.0", "method": "session/prompt", "id": "req-7", "params": {"pad": pad}})
    _next_error(client, named.encode() + b"\n")
    assert client.frames[-1].message["id"] == "req-7"
    # The id comes after the padding: nothing in the head names it.
    late = json.dumps({"jsonrpc": "2.0", "method": "session/prompt", "params": {"pad": pad}, "id": 9})
    _next_error(client, late.encode() + b"\n")
    assert client.frames[-1].message["id"] is None
    assert initialize(client)["protocolVersion"] == 1


def test_request_ids_are_echoed_exactly(spawn: ClientFactory) -> None:
    client = spawn()
    for request_id in ("abc", 10**30, -5, "1"):
        rid = client.start_request("initialize", {"protocolVersion": 1}, request_id=request_id)
        frame = client.response_frame(rid)
        assert frame.message["id"] == request_id and type(frame.message["id"]) is type(request_id)


def test_eof_on_stdin_shuts_down_in_order_with_exit_code_zero(spawn: ClientFactory) -> None:
    client = spawn()
    initialize(client)
    assert client.close() == 0


def test_unechoable_ids_and_lone_surrogates_still_get_valid_json_answers(spawn: ClientFactory) -> None:
    client = spawn()
    for line in (
        b'{"jsonrpc":"2.0","id":NaN,"method":"initialize"}',
        b'{"jsonrpc":"2.0","id":1e400,"method":"x"}',
    ):
        error = _next_error(client, line + b"\n")
        assert error["code"] == -32600
        assert client.frames[-1].message["id"] is None
    error = _next_error(client, b'{"jsonrpc":"2.0","id":5,"method":"\\ud800bad"}\n')
    assert error["code"] == -32601
    assert initialize(client)["protocolVersion"] == 1
