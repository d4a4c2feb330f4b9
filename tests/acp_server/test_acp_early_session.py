"""The first `session/new`, when plain, is answered before asyncio or the Agent load
(early_session.py, agent_core/fresh_session.py); the server then creates the session under the
answered id before it reads anything else, and a failed creation is the answer of every use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from acp_client import server_env
from acp_fixtures import spawn  # noqa: F401  (fixture)
from acp_helpers import ClientFactory, initialize, prompt

from acp_server.process.early_initialize import EarlyStart
from acp_server.process.early_session import answer_first_session_new
from acp_server.protocol.errors import AcpError
from acp_server.protocol.registry import MethodRegistry
from acp_server.sessions.methods import AcpServer
from agent_core.errors import SessionInUse
from agent_core.history.ownership import SessionOwnerLock
from agent_core.history.transcript import SessionStore
from agent_core.testing.scripted_model import ScriptedModelServer, text

INITIALIZE_PARAMS: dict[str, object] = {"protocolVersion": 1, "clientCapabilities": {}}


@pytest.fixture
def pipes() -> Iterator[tuple[int, int, int, int]]:
    """(client writes, server reads, server writes, client reads) over two real pipes."""
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    yield client_out, server_in, server_out, client_in
    for fd in (server_in, client_out, client_in, server_out):
        os.close(fd)


@pytest.fixture
def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A model set up in the environment, the data dir in tmp_path; returns the sessions dir."""
    for name, value in server_env(tmp_path / "home").items():
        monkeypatch.setenv(name, value)
    for name in ("CONTINUAL_ACP_KERNEL", "CONTINUAL_ACP_KERNEL_PYTHON", "CONTINUAL_ACP_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home" / "sessions"


def session_new(cwd: object, ident: int = 2, **extra: object) -> bytes:
    params = {"cwd": cwd, "mcpServers": [], **extra}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "session/new", "params": params}).encode()


def early(
    pipes: tuple[int, int, int, int], sent: bytes, params: dict[str, object] = INITIALIZE_PARAMS
) -> tuple[EarlyStart, bytes]:
    client_out, server_in, server_out, client_in = pipes
    os.write(client_out, sent)
    started = answer_first_session_new(server_in, server_out, EarlyStart(params, b""), wait=10.0)
    os.write(server_out, b"END")  # so the read below never blocks on an empty pipe
    return started, os.read(client_in, 1 << 16).removesuffix(b"END")


def test_a_plain_session_new_is_answered_with_a_reserved_session_directory(
    pipes: tuple[int, int, int, int], configured: Path, tmp_path: Path
) -> None:
    after = b'{"jsonrpc":"2.0","id":3,"method":"session/prompt"'
    started, answered = early(pipes, session_new(str(tmp_path)) + b"\n" + after)
    reply = json.loads(answered)
    assert reply["id"] == 2
    session_id = reply["result"]["sessionId"]
    assert started.session is not None and started.session.fresh.session_id == session_id
    assert started.unread == after
    assert (configured / session_id).stat().st_mode & 0o777 == 0o700
    assert reply["result"]["modes"]["currentModeId"] == "auto"
    # On disk as the store writes a new session, when the answer is out: loadable by anyone at once.
    store = SessionStore(configured.parent)
    assert store.exists(session_id)
    made = store.create("sess_made_by_the_store", str(tmp_path))
    made.close()

    def written(sid: str) -> tuple[object, object]:
        header = json.loads((configured / sid / "transcript.jsonl").read_text().splitlines()[0])
        meta = json.loads((configured / sid / "meta.json").read_text())
        for record in (header, meta):
            record.update(session_id="", created_at="")
        meta["updated_at"] = ""
        return header, meta

    assert written(session_id) == written("sess_made_by_the_store")
    with pytest.raises(SessionInUse):  # and owned by this process until the Agent takes it over
        SessionOwnerLock.acquire(configured / session_id, session_id)
    started.session.fresh.release()


def test_a_session_new_read_together_with_the_initialize_is_answered_too(
    pipes: tuple[int, int, int, int], configured: Path, tmp_path: Path
) -> None:
    _client_out, server_in, server_out, client_in = pipes
    pipelined = EarlyStart(INITIALIZE_PARAMS, session_new(str(tmp_path)) + b"\n")  # one read held both
    started = answer_first_session_new(server_in, server_out, pipelined, wait=10.0)
    assert started.session is not None and started.unread == b""
    assert json.loads(os.read(client_in, 1 << 16))["result"]["sessionId"] == started.session.fresh.session_id


@pytest.mark.parametrize(
    ("line", "env"),
    [
        (session_new("CWD", mcpServers=[{"name": "x", "command": "/bin/true", "args": [], "env": []}]), {}),
        (session_new("CWD", _meta={}), {}),
        (session_new("relative/dir"), {}),
        (session_new("CWD/missing"), {}),
        (session_new("CWD"), {"CONTINUAL_ACP_MODEL": ""}),
        (session_new("CWD"), {"CONTINUAL_ACP_KERNEL": "sandbox"}),
        (session_new("CWD"), {"CONTINUAL_ACP_MODE": "nonsense"}),
        (b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}', {}),
    ],
    ids=[
        "mcp-servers",
        "extra-param",
        "relative-cwd",
        "missing-cwd",
        "no-model",
        "sandbox",
        "bad-config",
        "other-method",
    ],
)
def test_anything_but_a_plain_session_new_the_session_can_be_reserved_for_goes_to_the_transport(
    pipes: tuple[int, int, int, int],
    configured: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    line: bytes,
    env: dict[str, str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    sent = line.replace(b"CWD", str(tmp_path).encode()) + b"\n"
    started, answered = early(pipes, sent)
    assert (started.session, started.unread, answered) == (None, sent, b"")
    assert not configured.is_dir() or list(configured.iterdir()) == []


def test_a_v2_connection_is_left_to_the_transport(
    pipes: tuple[int, int, int, int], configured: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTINUAL_ACP_PROTOCOL", "2")
    sent = session_new(str(tmp_path)) + b"\n"
    client_out, server_in, server_out, _client_in = pipes
    os.write(client_out, sent)
    v2 = {"protocolVersion": 2, "clientCapabilities": {}}
    started = answer_first_session_new(server_in, server_out, EarlyStart(v2, b""), wait=10.0)
    assert (started.session, started.unread) == (None, b"")  # nothing read: the transport reads it
    assert os.read(server_in, 1 << 16) == sent


# The real entry point, stopped the moment the early session/new answer is written.
SPY = """
import json, os, sys
import acp_server.process.early_session as early
answer = early.answer_first_session_new
def spy(*args, **kwargs):
    started = answer(*args, **kwargs)
    os.write(2, ("MODULES " + json.dumps([started.session is not None, sorted(sys.modules)]) + "\\n").encode())
    os._exit(0)
early.answer_first_session_new = spy
from acp_server.cli import main
main([])
"""

# What the early answer goes without: the event loop, the method table and transport, the Agent and
# its sessions, the turn events, the harness, the wire models and the kernels' libraries.
NOT_BEFORE_EARLY_SESSION_NEW = (
    "acp",
    "acp_server.sessions.methods",
    "acp_server.protocol.transport",
    "agent_core.agent",
    "agent_core.events",
    "agent_core.history.transcript",
    "agent_core.session",
    "anyio",
    "asyncio",
    "harness_store",
    "jsonrpcserver",
    "jupyter_client",
    "openai",
    "pydantic",
    "uuid",
    "zmq",
)


def test_the_early_session_new_answer_imports_no_event_loop_agent_or_harness(tmp_path: Path) -> None:
    sent = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS})
    out = subprocess.run(
        [sys.executable, "-c", SPY],
        input=sent + "\n" + session_new(str(tmp_path)).decode() + "\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, **server_env(tmp_path / "home")},
    )
    [line] = [x for x in out.stderr.splitlines() if x.startswith("MODULES ")]
    answered, modules = json.loads(line.removeprefix("MODULES "))
    assert answered is True
    assert sorted(set(NOT_BEFORE_EARLY_SESSION_NEW) & set(modules)) == []
    replies = [json.loads(x) for x in out.stdout.splitlines()]
    assert [r["id"] for r in replies] == [1, 2] and "sessionId" in replies[1]["result"]


def test_a_prompt_right_after_an_early_session_new_runs_in_the_created_session(
    spawn: ClientFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"  # settings the answer shows: models, refine model, mode
    config.write_text('models = ["other-model"]\nrefine_model = "refiner"\nmode = "ask"\n')
    with ScriptedModelServer([text("hello from the model")]) as model:
        client = spawn(model.base_url, CONTINUAL_ACP_CONFIG=str(config))
        initialize(client)
        early_result = client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = early_result["sessionId"]
        # At once: the server reads this only once the session it answered exists.
        assert prompt(client, sid, "hi").stop_reason == "end_turn"
        # The after-answer steps ran for it (the commands are advertised), as for any session/new.
        client.wait_for(
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["sessionId"] == sid
                and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
            )
        )
        # The answer given early is the one the full path gives (`_meta` makes a request not plain).
        full = client.request("session/new", {"cwd": str(tmp_path), "mcpServers": [], "_meta": {}})
        assert full["sessionId"] != sid
        assert {**early_result, "sessionId": ""} == {**full, "sessionId": ""}
    transcript = tmp_path / "home0" / "sessions" / sid / "transcript.jsonl"  # the spawn fixture's home
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["session_id"] == sid
    assert any("hello from the model" in json.dumps(x) for x in lines)


@pytest.mark.anyio
async def test_a_session_answered_early_whose_creation_fails_answers_that_failure_on_every_use(
    configured: Path, tmp_path: Path, pipes: tuple[int, int, int, int]
) -> None:
    started, _ = early(pipes, session_new(str(tmp_path)) + b"\n")
    assert started.session is not None
    session_id = started.session.fresh.session_id

    def failing_factory(config: object) -> object:
        raise RuntimeError("no agent today")

    server = AcpServer(MethodRegistry(), agent_factory=failing_factory)  # type: ignore[arg-type]
    server.connection = object()  # type: ignore[assignment]  # never reached: the agent fails first
    async with anyio.create_task_group() as tg:
        server.warm_up()
        tg.start_soon(server.start_agent)
        assert await server.adopt_early_session(started.session) == []
        for _ in range(2):
            with pytest.raises(AcpError) as failed:
                await server.open_session(session_id)
            assert f"session {session_id} could not be set up" in failed.value.message
            assert "no agent today" in failed.value.message
        tg.cancel_scope.cancel()
    # The session stays on disk as answered, its lock let go: a server that can start may load it.
    assert SessionStore(configured.parent).exists(session_id)
    SessionOwnerLock.acquire(configured / session_id, session_id).release()
