"""MCP over real stdio: `mcpServers` in session/new and session/load, cells using them, permissions,
`/mcp`, and no orphaned MCP server after SIGKILL of continual-acp.

The official Node SDK client drives a session with a stdio and an HTTP MCP server, every frame
schema-validated, in tests/conformance/test_conformance.py.

The tests that need only a fresh session share one server (`served`: each its own folder and
session, closed at its end, which stops the session's MCP servers); those that restart or kill the
server start their own (`spawn`)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "acp_server"))

from acp_client import AcpClient, RpcError, select, server_env
from acp_helpers import final_card, initialize, prompt, run_command, texts
from mcp_helpers import SERVER_SCRIPT, group_leader_argv, pid_alive, wait_until
from shared_server import Here, SharedServers, shared_servers

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call
from kernel_bridge import group_watch


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


Serve = Callable[..., Here]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    with shared_servers(tmp_path_factory) as made:
        yield made


@pytest.fixture
def served(servers: SharedServers, tmp_path: Path) -> Iterator[Serve]:
    """A session (with the MCP servers given) on the module's server, in the test's own folder."""
    with servers.test(tmp_path) as open_session:
        yield open_session


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def clients() -> Iterator[list[AcpClient]]:
    """Every client spawned must have kept stdout clean and sent only valid frames."""
    spawned: list[AcpClient] = []
    yield spawned
    for client in spawned:
        if client.proc.poll() is None:
            client.close()
        assert client.garbage == [], client.garbage
        assert client.violations == [], client.violations


def spawn(clients: list[AcpClient], home: Path, model: ScriptedModelServer, cwd: Path) -> AcpClient:
    client = AcpClient(server_env(home, model.base_url), cwd=str(cwd))
    clients.append(client)
    initialize(client)
    return client


def stdio_entry(name: str = "tools", **env: str) -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": [SERVER_SCRIPT],
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }


def new_session(client: AcpClient, cwd: Path, servers: list[dict[str, Any]]) -> str:
    result = client.request("session/new", {"cwd": str(cwd), "mcpServers": servers})
    return str(result["sessionId"])


def test_initialize_advertises_the_http_and_sse_mcp_transports(
    clients: list[AcpClient], home: Path, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = AcpClient(server_env(home, model.base_url), cwd=str(tmp_path))
    clients.append(client)
    assert initialize(client)["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": True}


def test_a_cell_calls_a_tool_of_a_server_given_in_session_new_and_its_image_reaches_the_card(
    served: Serve, tmp_path: Path
) -> None:
    code = "print(await mcp.call('tools', 'describe', name='zed'))\nawait mcp.tools_2.picture()"
    here = served(mcp_servers=[stdio_entry()])
    client, sid = here.client, here.sid
    here.model.push(tool_call(code, title="Use the MCP tools"), text("done"))
    assert prompt(client, sid, "describe zed", timeout=120)[0] == "end_turn"
    _start, updates = final_card(client, sid)
    assert updates[-1]["status"] == "completed"
    assert "{'name': 'zed', 'length': 3, 'repeated': 'zed'}" in texts(updates[-1]["content"])
    images = [
        block["content"]
        for update in updates
        for block in update.get("content") or []
        if block.get("type") == "content" and block["content"].get("type") == "image"
    ]
    assert images and images[-1]["mimeType"] == "image/png"


def test_a_destructive_tool_asks_the_editor_and_a_rejection_raises_in_the_cell(
    served: Serve, tmp_path: Path
) -> None:
    here = served(mcp_servers=[stdio_entry()])  # auto mode: cells themselves are not asked
    client, sid = here.client, here.sid
    client.permission_policy = select("reject")
    here.model.push(tool_call("await mcp.call('tools', 'delete-file', path='/tmp/doomed')"), text("ok"))
    assert prompt(client, sid, "delete it", timeout=120)[0] == "end_turn"
    asks = [r["params"] for r in here.agent_requests() if r["method"] == "session/request_permission"]
    assert len(asks) == 1
    assert (
        asks[0]["toolCall"]["rawInput"]["code"]
        == "await mcp.call('tools', 'delete-file', path=\"/tmp/doomed\")"
    )
    assert "delete-file" in asks[0]["toolCall"]["title"]
    cells = [u for u in client.updates(sid) if u["sessionUpdate"] == "tool_call" and u["kind"] == "execute"]
    cell_id = next(c["toolCallId"] for c in cells if not c["toolCallId"].startswith("mcp_"))
    final = [u for u in client.updates(sid) if u.get("toolCallId") == cell_id][-1]
    assert final["status"] == "failed"
    assert "McpPermissionDenied" in texts(final["content"])


def test_mcp_command_shows_the_servers_state(served: Serve, tmp_path: Path) -> None:
    here = served(mcp_servers=[stdio_entry()])
    client, sid = here.client, here.sid
    wait_until(lambda: "ready, 11 tools" in run_command(client, sid, "/mcp"), 90, "the server to be ready")
    assert run_command(client, sid, "/mcp restart tools") == "Restarted `tools`: ready, 11 tools."


def test_a_malformed_mcp_servers_entry_is_invalid_params(served: Serve, tmp_path: Path) -> None:
    client = served().client
    with pytest.raises(RpcError) as caught:
        client.request("session/new", {"cwd": str(tmp_path), "mcpServers": [{"name": "x", "args": []}]})
    assert caught.value.code == -32602
    assert caught.value.data["errors"][0]["loc"] == ["mcpServers", 0, "command"]


def test_session_load_reconnects_the_servers_it_is_given(
    clients: list[AcpClient], home: Path, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(
        tool_call("print(await mcp.call('tools', 'add', a=1, b=1))"),
        text("first"),
        tool_call("print(await mcp.call('tools', 'add', a=20, b=22))"),
        text("second"),
    )
    first = spawn(clients, home, model, tmp_path)
    sid = new_session(first, tmp_path, [stdio_entry()])
    assert prompt(first, sid, "one", timeout=120)[0] == "end_turn"
    assert first.close() == 0

    second = spawn(clients, home, model, tmp_path)
    second.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": [stdio_entry()]})
    assert prompt(second, sid, "two", timeout=120)[0] == "end_turn"
    _start, updates = final_card(second, sid)
    assert updates[-1]["status"] == "completed"
    assert texts(updates[-1]["content"]).endswith("```\n42\n```")


def test_sigkill_of_continual_acp_leaves_no_mcp_server_running(
    clients: list[AcpClient], home: Path, model: ScriptedModelServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "mcp.pid"
    client = spawn(clients, home, model, tmp_path)
    new_session(client, tmp_path, [stdio_entry(MCP_TEST_PID_FILE=str(pid_file))])
    wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", 90, "the MCP server to start")
    pid = int(pid_file.read_text())
    assert pid_alive(pid)
    # The server runs in the group of kernel_bridge's group watch, which must end it.
    assert group_leader_argv(pid)[3:6] == [group_watch.script_path(), str(client.proc.pid), "--"]
    os.kill(client.proc.pid, signal.SIGKILL)
    client.proc.wait(10)
    wait_until(lambda: not pid_alive(pid), 20, f"MCP server pid {pid} to be gone after SIGKILL")


def test_the_system_prompt_lists_the_sessions_servers_and_how_to_look_tools_up(
    served: Serve, tmp_path: Path
) -> None:
    here = served(mcp_servers=[stdio_entry()])
    client, sid = here.client, here.sid
    here.model.push(text("hello"))
    assert prompt(client, sid, "hi", timeout=120)[0] == "end_turn"
    system = here.requests()[0]["messages"][0]["content"]
    assert "# MCP servers" in system
    assert "- `mcp.tools_2` (tools): " in system
    assert "await mcp.tools(server=None, query=None, schemas=False)" in system


def test_session_close_stops_the_sessions_mcp_servers(served: Serve, tmp_path: Path) -> None:
    pid_file = tmp_path / "mcp.pid"
    here = served(mcp_servers=[stdio_entry(MCP_TEST_PID_FILE=str(pid_file))])
    client, sid = here.client, here.sid
    wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", 90, "the MCP server to start")
    pid = int(pid_file.read_text())
    client.request("session/close", {"sessionId": sid})
    wait_until(lambda: not pid_alive(pid), 20, f"MCP server pid {pid} to be gone after session/close")
    assert client.proc.poll() is None  # the server itself keeps serving


def test_session_resume_reconnects_the_servers_it_is_given(
    clients: list[AcpClient], home: Path, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text("first"), tool_call("print(await mcp.call('tools', 'add', a=40, b=2))"), text("second"))
    first = spawn(clients, home, model, tmp_path)
    sid = new_session(first, tmp_path, [])
    assert prompt(first, sid, "one", timeout=120)[0] == "end_turn"
    assert first.close() == 0

    second = spawn(clients, home, model, tmp_path)
    second.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": [stdio_entry()]})
    assert prompt(second, sid, "two", timeout=120)[0] == "end_turn"
    _start, updates = final_card(second, sid)
    assert updates[-1]["status"] == "completed"
    assert texts(updates[-1]["content"]).endswith("```\n42\n```")


def test_a_server_that_fails_to_start_is_told_in_the_thread(served: Serve, tmp_path: Path) -> None:
    broken = {"name": "broken", "command": str(tmp_path / "no-such-mcp-server"), "args": [], "env": []}
    here = served(mcp_servers=[broken])
    client, sid = here.client, here.sid
    frame = here.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            and "MCP server broken" in m["params"]["update"]["content"]["text"]
        ),
        timeout=60,
    )
    assert frame.message["params"]["sessionId"] == sid
    assert "broken" in run_command(client, sid, "/mcp")
