"""The main flows over real stdio with the defaults a user gets: a warm kernel pool (size 1) and each
session's kernel started at `session/new`. Most stdio tests turn both off to save CPU; this module
runs prompt, cancel, load, /refine, autonomous mode, subagents and MCP against one shared server that
keeps them on, one session per flow. Run as root, the kernel (from the warm pool), the gate process
and the stdio MCP server are each checked to hold no capability.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, server_env
from acp_helpers import final_card, initialize, new_session, prompt, send_prompt, texts

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

WAIT = 120.0
CHILD = "[[defaults-child]]"
TOOLS_SERVER = str(Path(__file__).resolve().parents[1] / "mcp" / "servers" / "tools_server.py")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def cell(code: str, title: str | None = None) -> dict[str, Any]:
    return tool_call(textwrap.dedent(code).strip(), title=title)


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    routes = {CHILD: [cell("print(6 * 7)"), text("child answer: 42")]}
    with ScriptedModelServer(routes=routes) as server:
        yield server


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("defaults")


@pytest.fixture(scope="module")
def client(model: ScriptedModelServer, root: Path) -> Iterator[AcpClient]:
    home = root / "home"
    home.mkdir()
    env = server_env(home, model.base_url)
    # The product's own defaults: no pool-size or eager-start override (server_env turns both off).
    del env["CONTINUAL_ACP_KERNEL_POOL"], env["CONTINUAL_ACP_EAGER_KERNEL"]
    assert not {"CONTINUAL_ACP_KERNEL_POOL", "CONTINUAL_ACP_EAGER_KERNEL"} & set(os.environ)
    client = AcpClient(env, cwd=str(root))
    initialize(client)
    yield client
    client.close()
    assert not client.garbage and not client.violations, (client.garbage, client.violations)


ROOT_USER = sys.platform.startswith("linux") and os.geteuid() == 0
CAPS = "print('CAPS', *(l.split()[1] for l in open('/proc/{pid}/status') if l.startswith(('CapEff', 'CapBnd', 'NoNewPrivs'))))"
NO_CAPS = "CAPS 0000000000000000 0000000000000000 1"


def _workdir(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir()
    return path


def test_a_prompt_runs_a_cell_in_the_eagerly_started_kernel(
    client: AcpClient, model: ScriptedModelServer, root: Path
) -> None:
    model.push(cell("print(6 * 7)\n" + CAPS.format(pid="self"), "compute"), text("It is 42."))
    sid, _ = new_session(client, _workdir(root, "prompt"))
    assert prompt(client, sid, "what is 6 * 7?", timeout=WAIT).stop_reason == "end_turn"
    _start, updates = final_card(client, sid)
    output = texts(updates[-1]["content"])
    assert updates[-1]["status"] == "completed" and "42" in output
    if ROOT_USER:  # a root server's kernel (here from the warm pool) holds no capability
        assert NO_CAPS in output, output


def test_a_cancelled_prompt_ends_cancelled_while_its_cell_runs(
    client: AcpClient, model: ScriptedModelServer, root: Path
) -> None:
    model.push(cell("import time\nfor _ in range(600):\n    time.sleep(0.1)", "long"))
    sid, _ = new_session(client, _workdir(root, "cancel"))
    request = send_prompt(client, sid, "run the long job")
    client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["sessionId"] == sid
            and m["params"]["update"].get("status") == "in_progress"
        ),
        timeout=WAIT,
    )
    client.notify("session/cancel", {"sessionId": sid})
    answer = client.response_frame(request, timeout=WAIT).message
    assert answer["result"]["stopReason"] == "cancelled"
    assert model.remaining == 0


def test_a_loaded_session_replays_its_history_and_runs_its_next_cell(
    client: AcpClient, model: ScriptedModelServer, root: Path
) -> None:
    cwd = _workdir(root, "load")
    model.push(text("Noted: the answer is forty-two."))
    sid, _ = new_session(client, cwd)
    assert prompt(client, sid, "remember forty-two", timeout=WAIT).stop_reason == "end_turn"
    seen = len(client.frames)
    client.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}, timeout=WAIT)
    replayed = "".join(
        f.message["params"]["update"]["content"]["text"]
        for f in client.frames[seen:]
        if f.message.get("method") == "session/update"
        and f.message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    assert "Noted: the answer is forty-two." in replayed
    model.push(cell("print(2 ** 10)"), text("1024"))
    assert prompt(client, sid, "and 2 ** 10?", timeout=WAIT).stop_reason == "end_turn"
    _start, updates = final_card(client, sid)
    assert updates[-1]["status"] == "completed" and "1024" in texts(updates[-1]["content"])


def test_refine_applies_a_local_memory(client: AcpClient, model: ScriptedModelServer, root: Path) -> None:
    edit = {
        "action": "create",
        "kind": "memory",
        "id": "test_command",
        "title": "Test command",
        "content": "Run `make check`, not bare pytest.",
        "evidence": [],
    }
    plan = {
        "summary": "Remember the test command",
        "rationale": "said so",
        "expected_outcome": "x",
        "edits": [edit],
    }
    model.push(text(json.dumps(plan)))
    sid, _ = new_session(client, _workdir(root, "refine"))
    assert prompt(client, sid, "/refine remember the test command", timeout=WAIT).stop_reason == "end_turn"
    state = client.request("_harness/state", {"sessionId": sid, "scope": "local"})
    assert [e["id"] for e in state["entries"]] == ["test_command"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV}
    )


def test_autonomous_mode_fixes_a_failing_test_until_its_gate_passes(
    client: AcpClient, model: ScriptedModelServer, root: Path
) -> None:
    repo = _workdir(root, "project")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n"
        f"    open({str(root / 'gate_status.txt')!r}, 'w').write(open('/proc/self/status').read())\n"
        "    assert add(2, 3) == 5\n"
    )
    gate = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
    (repo / ".continual-acp").mkdir()
    (repo / ".continual-acp" / "gates.toml").write_text(f"[[gate]]\ncommand = {gate!r}\ntimeout = 120\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "failing test")
    fix = f"open({str(repo / 'calc.py')!r}, 'w').write('def add(a, b):\\n    return a + b\\n')"
    model.push(cell(fix, "use +"), text("Fixed."))
    sid, _ = new_session(client, repo)
    client.request("session/set_mode", {"sessionId": sid, "modeId": "autonomous"})
    assert prompt(client, sid, "make the tests pass", timeout=WAIT).stop_reason == "end_turn"
    gates = [u for u in client.updates(sid) if str(u.get("toolCallId", "")).startswith("gate_")]
    assert gates and gates[-1]["status"] == "completed"
    if ROOT_USER:  # a root server's gate process holds no capability
        status = dict(line.split(":\t") for line in (root / "gate_status.txt").read_text().splitlines())
        assert (status["CapEff"], status["CapBnd"], status["NoNewPrivs"]) == ("0" * 16, "0" * 16, "1")


def test_a_subagent_runs_a_cell_in_its_own_kernel_and_answers_its_parent(
    client: AcpClient, model: ScriptedModelServer, root: Path
) -> None:
    model.push(
        cell(
            f"""
            child = await agents.spawn("{CHILD} compute 6*7", name="calc")
            got = []
            while not got:
                got = [m for m in await agents.inbox(wait=True, timeout=90) if m.get("final")]
            print("FINAL", got[0]["state"], got[0]["text"])
            """,
            "delegate",
        ),
        text("The child said 42."),
    )
    sid, _ = new_session(client, _workdir(root, "subagents"))
    assert prompt(client, sid, "delegate it", timeout=WAIT).stop_reason == "end_turn"
    [start] = [
        u for u in client.updates(sid) if u["sessionUpdate"] == "tool_call" and u.get("title") == "delegate"
    ]
    final = [u for u in client.updates(sid) if u.get("toolCallId") == start["toolCallId"]][-1]
    assert "FINAL finished child answer: 42" in texts(final["content"]), final


def test_a_cell_calls_a_stdio_mcp_server_given_at_session_new(
    client: AcpClient, model: ScriptedModelServer, root: Path
) -> None:
    code = "print(await mcp.call('tools', 'add', a=2, b=3))\npid = await mcp.call('tools', 'pid')\n"
    model.push(cell(code + CAPS.format(pid="{pid}").replace("open('", "open(f'"), "add"), text("5"))
    server = {"name": "tools", "command": sys.executable, "args": [TOOLS_SERVER], "env": []}
    result = client.request("session/new", {"cwd": str(_workdir(root, "mcp")), "mcpServers": [server]})
    sid = str(result["sessionId"])
    assert prompt(client, sid, "add 2 and 3", timeout=WAIT).stop_reason == "end_turn"
    _start, updates = final_card(client, sid)
    output = texts(updates[-1]["content"])
    assert updates[-1]["status"] == "completed" and "5" in output
    if ROOT_USER:  # a root server's stdio MCP server holds no capability
        assert NO_CAPS in output, output
