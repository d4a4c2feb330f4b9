"""5,000 random and mutated lines: no crash, every request answered, a valid request still works."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize

LINES = 5000
# Methods whose handlers are cheap with no session open (fuzzing session/new would start kernels).
METHODS = [
    "initialize",
    "session/list",
    "session/prompt",
    "session/cancel",
    "session/set_mode",
    "session/set_config_option",
    "session/close",
    "session/set_model",
    "$/cancel_request",
    "_harness/status",
    "nope",
    "",
]
VALID_PARAMS: dict[str, Any] = {
    "initialize": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}},
    "session/list": {},
    "session/prompt": {"sessionId": "missing", "prompt": [{"type": "text", "text": "hi"}]},
    "session/cancel": {"sessionId": "missing"},
    "session/set_mode": {"sessionId": "missing", "modeId": "ask"},
    "session/set_config_option": {"sessionId": "missing", "configId": "mode", "value": "auto"},
    "session/close": {"sessionId": "missing"},
    "$/cancel_request": {"requestId": 1},
}
WEIRD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    10**40,
    1.5,
    "",
    "x" * 300,
    [],
    {},
    [1, [2, [3]]],
    {"a": {"b": None}},
]


def _mutate(rng: random.Random, value: Any, depth: int = 0) -> Any:
    if isinstance(value, dict) and value and depth < 4 and rng.random() < 0.7:
        value = dict(value)
        key = rng.choice(list(value))
        roll = rng.random()
        if roll < 0.3:
            del value[key]
        elif roll < 0.6:
            value[key] = rng.choice(WEIRD_VALUES)
        else:
            value[key] = _mutate(rng, value[key], depth + 1)
        return value
    if isinstance(value, list) and value and rng.random() < 0.5:
        return [_mutate(rng, v, depth + 1) for v in value]
    return rng.choice(WEIRD_VALUES)


NASTY = [
    b'{"jsonrpc":"2.0","id":NaN,"method":"initialize"}',
    b'{"jsonrpc":"2.0","id":Infinity,"method":"session/list"}',
    b'{"jsonrpc":"2.0","method":"\\ud800","params":{}}',
    b'{"jsonrpc":"2.0","id":null,"method":"session/list","params":{"cwd":"\\udfff"}}',
    b"[" * 5000 + b"]" * 5000,
    b'{"a":' * 3000 + b"1" + b"}" * 3000,
    b'{"jsonrpc":"2.0","id":1e400,"method":"x"}',
    b"\xff\xfe\x00garbage",
]


def _line(rng: random.Random, index: int, expected: set[str]) -> bytes:
    roll = rng.random()
    if roll < 0.02:
        return rng.choice(NASTY) + b"\n"
    if roll < 0.12:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))).replace(b"\n", b" ") + b"\n"
    if roll < 0.18:
        return (
            json.dumps(
                [{"jsonrpc": "2.0", "id": f"b{index}", "method": "initialize"}] * rng.randrange(0, 3)
            ).encode()
            + b"\n"
        )
    if roll < 0.22:
        return json.dumps(rng.choice(WEIRD_VALUES)).encode() + b"\n"
    method = rng.choice(METHODS)
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    is_request = rng.random() < 0.8 and method not in ("session/cancel", "$/cancel_request")
    if is_request:
        message["id"] = f"f{index}" if rng.random() < 0.5 else 1_000_000 + index
    if method in VALID_PARAMS and rng.random() < 0.85:
        params = VALID_PARAMS[method]
        message["params"] = _mutate(rng, params) if rng.random() < 0.7 else params
    elif rng.random() < 0.5:
        message["params"] = rng.choice(WEIRD_VALUES)
    if rng.random() < 0.1:
        message = _mutate(rng, message)
    text = json.dumps(message)
    if rng.random() < 0.05 and len(text) > 2:
        text = text[: rng.randrange(1, len(text))]  # truncated: a parse error, no id to answer
    elif (
        isinstance(message, dict)
        and "id" in message
        and isinstance(message["id"], str | int)
        and not isinstance(message["id"], bool)
    ):
        expected.add(json.dumps(message["id"]))
    return text.encode() + b"\n"


def test_fuzzed_input_gets_answers_and_the_server_survives(spawn: ClientFactory) -> None:
    client: AcpClient = spawn(CONTINUAL_ACP_KERNEL_POOL="0")
    rng = random.Random(20261130)
    expected: set[str] = set()
    lines = [_line(rng, i, expected) for i in range(LINES)]
    writer = threading.Thread(target=lambda: client.send_raw(b"".join(lines)))
    writer.start()
    writer.join(60)

    def answered() -> set[str]:
        return {json.dumps(f.message.get("id")) for f in client.frames if "method" not in f.message}

    # Every request with a usable id is answered (a mutated id may collide with an earlier one,
    # so this is a set comparison).
    with client._cond:
        client._cond.wait_for(lambda: expected <= answered() or client.proc.poll() is not None, 90)
    missing = expected - answered()
    assert client.proc.poll() is None, f"server died:\n{client.stderr()[-3000:]}"
    assert not missing, f"{len(missing)} requests unanswered, e.g. {sorted(missing)[:5]}"
    assert initialize(client)["protocolVersion"] == 1
    assert client.close() == 0
