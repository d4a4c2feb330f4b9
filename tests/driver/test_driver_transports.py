"""acp_driver's transports over real pipes: a real `python -m acp_server` through the asyncio
transport, and small scripted agents for what a real server never does (garbage, reordering)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from acp_client import server_env

from acp_driver import AsyncClient, BadLine, ClientCore, ClientError, ClientPolicy, Incoming, ThreadClient

# A scripted agent: answers "pair" requests in reverse order, and on "go" writes a garbage line,
# asks the client to write a file, and answers with the client's reply.
AGENT = textwrap.dedent(
    """
    import json, sys

    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n")
        sys.stdout.flush()

    held = []
    while raw := sys.stdin.readline():
        message = json.loads(raw)
        if message.get("method") == "pair":
            held.append(message)
            if len(held) == 2:
                for request in reversed(held):
                    send({"jsonrpc": "2.0", "id": request["id"], "result": {"echo": request["params"]}})
                held.clear()
        elif message.get("method") == "go":
            sys.stdout.write("this is not JSON\\n")
            send({"jsonrpc": "2.0", "id": "agent-1", "method": "fs/write_text_file",
                  "params": {"sessionId": "s", "path": message["params"]["path"], "content": "x"}})
            answer = json.loads(sys.stdin.readline())
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"answer": answer}})
    """
)


@pytest.fixture
def agent(tmp_path: Path) -> list[str]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    return [sys.executable, str(script)]


def test_the_async_transport_drives_a_real_server_through_initialize_a_list_and_an_error(
    tmp_path: Path,
) -> None:
    async def run() -> tuple[dict[str, Any], dict[str, Any], ClientError, int]:
        env = {**os.environ, **server_env(tmp_path / "home")}
        client = await AsyncClient.spawn(
            [sys.executable, "-m", "acp_server"], env=env, cwd=tmp_path, stderr=subprocess.DEVNULL
        )
        try:
            init = await client.request(
                "initialize", {"protocolVersion": 1, "clientCapabilities": {}}, timeout=60
            )
            listed = await client.request("session/list", {}, timeout=60)
            with pytest.raises(ClientError) as failed:
                await client.request("no/such_method", {}, timeout=60)
        finally:
            code = await client.close()
        return init, listed, failed.value, code

    init, listed, failed, code = asyncio.run(run())
    assert init["protocolVersion"] == 1
    assert listed["sessions"] == []
    assert failed.error is not None and failed.error["code"] == -32601
    assert str(failed).startswith("no/such_method failed: ")
    assert code == 0


def test_the_async_transport_matches_answers_that_come_in_reverse_order(
    agent: list[str], tmp_path: Path
) -> None:
    async def run() -> list[dict[str, Any]]:
        client = await AsyncClient.spawn(agent, cwd=tmp_path)
        try:
            return list(
                await asyncio.gather(
                    client.request("pair", {"n": 1}, timeout=30), client.request("pair", {"n": 2}, timeout=30)
                )
            )
        finally:
            await client.close()

    assert asyncio.run(run()) == [{"echo": {"n": 1}}, {"echo": {"n": 2}}]


def test_the_async_transport_stops_at_a_garbage_line_and_fails_the_waiting_request(
    agent: list[str], tmp_path: Path
) -> None:
    async def run() -> ClientError:
        client = await AsyncClient.spawn(agent, cwd=tmp_path)
        try:
            with pytest.raises(ClientError) as failed:
                await client.request("go", {"path": str(tmp_path / "f.txt")}, timeout=30)
            with pytest.raises(ClientError, match="closed its stdout"):
                await client.request("pair", {}, timeout=30)  # the reader has stopped: refused at once
        finally:
            client.kill()
            await client.close()
        return failed.value

    failed = asyncio.run(run())
    assert "go failed: reading the server failed: not JSON" in str(failed)
    assert not (tmp_path / "f.txt").exists()  # nothing after the garbage was acted on


def test_the_thread_transport_reports_a_garbage_line_and_keeps_going(
    agent: list[str], tmp_path: Path
) -> None:
    proc = subprocess.Popen(agent, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdin is not None and proc.stdout is not None
    seen: list[Incoming] = []
    client = ThreadClient(
        proc.stdin, proc.stdout, ClientCore(ClientPolicy(root=tmp_path)), on_incoming=seen.append
    )
    client.start()
    try:
        result = client.request("go", {"path": str(tmp_path / "f.txt")}, timeout=30)
        outside = client.request("go", {"path": str(tmp_path.parent / "f.txt")}, timeout=30)
    finally:
        proc.stdin.close()
        proc.wait(30)
    assert result == {"answer": {"jsonrpc": "2.0", "id": "agent-1", "result": {}}}
    assert (tmp_path / "f.txt").read_text(encoding="utf-8") == "x"
    assert outside["answer"]["error"]["code"] == -32602  # outside the root: refused
    assert isinstance(seen[0], BadLine) and seen[0].raw == b"this is not JSON\n"
    client.reader.join(10)
    assert client.ended
