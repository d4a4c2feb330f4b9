"""The recording proxy: replies pass through unchanged, every exchange is written with its usage."""

from __future__ import annotations

import http.client
import io
import json
import socket
import struct
import threading
import urllib.request
from urllib.parse import urlsplit

import pytest

from agent_core.testing.scripted_model import ScriptedModelServer, stall, text, usage
from continual_eval.proxy import RecordingProxy


def _post(url: str, body: dict[str, object], timeout: float = 10) -> bytes:
    request = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return bytes(reply.read())


def test_a_streamed_reply_passes_through_and_is_recorded_with_usage_split() -> None:
    reply = text("hello there", usage=usage(50, 4, cached_tokens=30))
    with ScriptedModelServer([reply]) as model, RecordingProxy(model.base_url) as proxy:
        log = io.StringIO()
        proxy.set_log(log, session=1)
        raw = _post(
            proxy.base_url, {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        )
        proxy.set_log(None)
    assert b"hello there" in raw and raw.rstrip().endswith(b"data: [DONE]")
    (entry,) = [json.loads(line) for line in log.getvalue().splitlines()]
    assert entry["session"] == 1
    assert entry["request"]["messages"][0]["content"] == "hi"
    assert entry["status"] == 200
    assert entry["response"] == raw.decode()
    assert entry["usage"] == {
        "input_tokens": 20,
        "output_tokens": 4,
        "cache_read_tokens": 30,
        "reported": True,
    }


def test_an_exchange_without_a_reply_is_written_unfinished_when_the_log_changes() -> None:
    with ScriptedModelServer([stall(30, before="partial")]) as model, RecordingProxy(model.base_url) as proxy:
        log = io.StringIO()
        proxy.set_log(log, session=2)
        caller = threading.Thread(
            target=lambda: _post(proxy.base_url, {"model": "m", "stream": True, "messages": []}, timeout=30),
            daemon=True,
        )
        caller.start()
        assert model.wait_for_requests(1, timeout=10)
        proxy.set_log(None)
        (entry,) = [json.loads(line) for line in log.getvalue().splitlines()]
    assert entry["status"] is None
    assert entry["error"] == "no complete reply before the session ended"
    assert entry["usage"]["reported"] is False


def test_an_unreachable_endpoint_is_a_502_naming_it_and_recorded() -> None:
    with ScriptedModelServer() as model:
        dead = model.base_url
    with RecordingProxy(dead) as proxy:
        log = io.StringIO()
        proxy.set_log(log)
        try:
            _post(proxy.base_url, {"model": "m", "messages": []})
        except urllib.error.HTTPError as exc:
            assert exc.code == 502
            assert "the model endpoint could not be reached" in exc.read().decode()
        else:
            raise AssertionError("the proxy answered 200 for an endpoint that is down")
    (entry,) = [json.loads(line) for line in log.getvalue().splitlines()]
    assert entry["status"] == 502


def test_a_client_resetting_an_idle_connection_is_dropped_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ScriptedModelServer([text("one")]) as model, RecordingProxy(model.base_url) as proxy:
        address = urlsplit(proxy.base_url)
        conn = http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        conn.request("POST", address.path + "/chat/completions", body=body)
        assert b"one" in conn.getresponse().read()
        # Close with a reset (linger 0), as a process exiting with a pooled connection open does.
        assert conn.sock is not None
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
        assert proxy.dropped.wait(10)
    assert capsys.readouterr().err == ""


def test_the_runs_seed_and_temperature_reach_the_endpoint_and_the_meter_counts_the_cost() -> None:
    from continual_eval.proxy import CostMeter

    meter = CostMeter()
    with (
        ScriptedModelServer([text("a", usage=usage(50, 4)), text("b", usage=usage(10, 1))]) as model,
        RecordingProxy(model.base_url, overrides={"seed": 7, "temperature": 0.5}, meter=meter) as proxy,
    ):
        log = io.StringIO()
        proxy.set_log(log)
        for _ in range(2):
            _post(proxy.base_url, {"model": "m", "stream": True, "seed": 1, "messages": []})
        proxy.set_log(None)
        sent = list(model.requests)
    assert [(r["seed"], r["temperature"]) for r in sent] == [(7, 0.5), (7, 0.5)]
    assert [json.loads(line)["request"]["seed"] for line in log.getvalue().splitlines()] == [7, 7]
    assert (meter.requests, meter.tokens) == (2, 65)
    assert meter.line() == "cost so far: 2 requests, 65 tokens"


def test_the_cost_meter_says_the_cost_every_n_requests() -> None:
    from continual_eval.proxy import CostMeter

    said: list[str] = []
    meter = CostMeter(report=said.append, every=2)
    for tokens in (10, 20, 30, 40, 50):
        meter.add(tokens)
    assert said == ["cost so far: 2 requests, 30 tokens", "cost so far: 4 requests, 100 tokens"]
