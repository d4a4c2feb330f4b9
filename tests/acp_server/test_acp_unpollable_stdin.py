"""`serve` with a stdin the event loop cannot poll (/dev/null, a regular file): it reads to the end,
answers what it read and exits 0, with no traceback.

Launchers and registry checks start agents with stdin at /dev/null; asyncio takes that character
device for a pipe, but epoll refuses it only later, inside the loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from acp_client import server_env

from acp_server.protocol.pipes import open_reader

# A hang is the failure this file pins: the bound only keeps a broken server from eating the run.
EXIT_TIMEOUT_S = 20


def _serve(
    tmp_path: Path, stdin: object, stdout: object = subprocess.PIPE
) -> subprocess.CompletedProcess[bytes]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, **server_env(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_server", "serve"],
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    try:
        out, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"serve did not exit at the end of its input; stderr:\n{err.decode()[-2000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_stdin_at_dev_null_exits_zero_without_a_traceback(tmp_path: Path) -> None:
    with open(os.devnull, "rb") as devnull:
        done = _serve(tmp_path, devnull)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr and b"PermissionError" not in done.stderr, done.stderr.decode()
    assert done.stdout == b""


def test_stdout_at_dev_null_still_serves_to_the_end_of_input(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}) + "\n"
    )
    with requests.open("rb") as stdin, open(os.devnull, "wb") as devnull_out:
        done = _serve(tmp_path, stdin, devnull_out)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr, done.stderr.decode()


def test_a_reader_over_dev_null_reads_the_end_without_an_event_loop_error() -> None:
    """The transport's reader itself (serve exits before it when no byte ever comes)."""
    errors: list[dict[str, object]] = []

    async def read_to_end() -> bytes:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
        fd = os.open(os.devnull, os.O_RDONLY)
        try:
            reader = await open_reader(fd)
            # Before the fallback, asyncio's pipe reader never saw the end (epoll refused the fd).
            return await asyncio.wait_for(reader.receive(), EXIT_TIMEOUT_S)
        finally:
            os.close(fd)

    assert asyncio.run(read_to_end()) == b""
    assert errors == []


def test_stdin_from_a_regular_file_is_answered_then_exits_zero(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "no/such_method", "params": {}},
    ]
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with requests.open("rb") as stdin:
        done = _serve(tmp_path, stdin)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    answers = {m["id"]: m for m in map(json.loads, done.stdout.decode().splitlines())}
    assert answers[1]["result"]["agentInfo"]["name"] == "continual-acp"
    assert answers[2]["error"]["code"] == -32601
