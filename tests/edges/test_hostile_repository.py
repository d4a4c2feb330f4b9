"""A hostile repository cannot freeze the server, and a frozen server never outlives its editor.

Real servers over real stdio with the scripted model. The hostile skills folder (tests/edges/
hostile_repo.py), each shape alone and all together: `session/new` and two prompts answer, and each
path the server must skip is warned about once. A server whose event loop is blocked on purpose (a
`-c` harness whose per-prompt command parsing never returns) logs the loop's stack, and
still exits after stdin closes, within the grace period, with its kernel killed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from acp_client import AcpClient, server_env
from acp_fixtures import model, spawn
from acp_helpers import ClientFactory, initialize, new_session, prompt, run_command
from hostile_repo import SHAPES, build

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

__all__ = ["model", "spawn"]  # the stdio fixtures, shared with tests/acp_server
GENEROUS = 120.0  # seconds: an answer is asserted, never a time

# One case per shape and one with all of them. A skills folder that links /proc/self/environ makes
# the server read its own environment block: that server is exec'd (a forked one's block is the
# zygote's, which holds no model key, so the check that the key never reaches the prompt would hold
# for nothing). The other shapes fork their servers, as the rest of the suite does.
SHAPE_CASES = [
    pytest.param(shapes, id=name, marks=[pytest.mark.exec_server] if "proc_environ" in shapes else [])
    for name, shapes in [*((name, [name]) for name in SHAPES), ("all", list(SHAPES))]
]


def _warnings_for(stderr: str, path: Path) -> list[str]:
    return [line for line in stderr.splitlines() if "WARNING" in line and f"skipped {path}:" in line]


@pytest.mark.parametrize("shapes", SHAPE_CASES)
def test_hostile_skills_folder_neither_hangs_prompts_nor_warns_twice(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path, shapes: list[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    skipped = build(project, shapes)
    model.fallback = text("done")
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, project)
    assert prompt(client, sid, "first", timeout=GENEROUS).stop_reason == "end_turn"
    assert prompt(client, sid, "second", timeout=GENEROUS).stop_reason == "end_turn"
    stderr = client.stderr()
    for path, reason in skipped:
        warnings = _warnings_for(stderr, path)
        assert len(warnings) == 1, f"{path}: {stderr[-3000:]}"
        assert reason in warnings[0], warnings[0]
    system = model.requests[-1]["messages"][0]["content"]
    assert "test-key" not in system  # /proc/self/environ (the model key) never reaches the prompt


def test_a_skill_whose_body_is_over_the_cap_is_not_sent_to_the_model(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    build(project, ["huge"])
    model.fallback = text("done")
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, project)
    reply = run_command(client, sid, "/skill:huge apply it", timeout=GENEROUS)
    assert "No user skill named 'huge'" in reply
    assert "the skill 'huge' cannot be used" in client.stderr()
    assert model.requests == []  # 60 MB of instructions never left for the model


@pytest.mark.parametrize("shapes", SHAPE_CASES)
def test_cells_run_in_a_project_with_a_hostile_skills_folder(
    spawn: ClientFactory, tmp_path: Path, shapes: list[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    build(project, shapes)
    script = [
        tool_call("print(len(skills.list()))"),
        text("one"),
        tool_call("print('cell-two-' + 'ran')"),
        text("two"),
    ]
    with ScriptedModelServer(script, fallback=text("done")) as model:
        client = spawn(model.base_url)
        initialize(client)
        sid, _ = new_session(client, project)
        assert prompt(client, sid, "first", timeout=GENEROUS).stop_reason == "end_turn"
        assert prompt(client, sid, "second", timeout=GENEROUS).stop_reason == "end_turn"
        outputs = [m["content"] for r in model.requests for m in r["messages"] if m.get("role") == "tool"]
        assert any("cell-two-ran" in str(out) for out in outputs), outputs


# ---------------------------------------------------------------- a blocked loop

# The server, with a call on its event loop made to never return (or to return after the seconds
# written in the marker) once the marker exists in its cwd: every prompt parses its command line on
# the loop, and that is where it blocks -- as a FIFO in the workspace once blocked a read there.
BLOCKING_SERVER = """
import os, pathlib, sys, time
import acp_server.turn.session_prompt as session_prompt
real = session_prompt.parse_command
def block_the_loop(marker):
    time.sleep(float(marker.read_text() or 3600))
def parse_command(blocks):
    marker = pathlib.Path(os.getcwd()) / "BLOCK-THE-LOOP"
    if marker.exists():
        block_the_loop(marker)
    return real(blocks)
session_prompt.parse_command = parse_command
from acp_server.cli import main
sys.exit(main([]))
"""


def _descendants(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = {pid for pid in pids if _alive(pid)}
        if not alive:
            return set()
        time.sleep(0.1)
    return {pid for pid in pids if _alive(pid)}


def _blocked_server(tmp_path: Path, model: ScriptedModelServer, **env: str) -> tuple[AcpClient, Path]:
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    client = AcpClient(
        server_env(home, model.base_url, **env),
        argv=[sys.executable, "-c", BLOCKING_SERVER],
        cwd=str(project),
    )
    return client, project


def test_server_with_a_blocked_loop_exits_after_stdin_closes_and_kills_its_kernel(tmp_path: Path) -> None:
    with ScriptedModelServer([tool_call("print('kernel up')"), text("ran")], fallback=text("done")) as model:
        _run_blocked_server(model, tmp_path)


def _run_blocked_server(model: ScriptedModelServer, tmp_path: Path) -> None:
    reports = tmp_path / "stall-reports"
    reports.mkdir()
    client, project = _blocked_server(
        tmp_path,
        model,
        CONTINUAL_ACP_STALL_SECONDS="1",
        CONTINUAL_ACP_EXIT_GRACE_SECONDS="2",
        CONTINUAL_ACP_STALL_REPORT=str(reports),
    )
    try:
        initialize(client)
        sid, _ = new_session(client, project)
        assert prompt(client, sid, "start the kernel", timeout=GENEROUS).stop_reason == "end_turn"
        children = _descendants(client.proc.pid)
        assert children, "the cell started no kernel"
        before = len(client.stderr())  # a slow import earlier may have been a stall of its own
        (project / "BLOCK-THE-LOOP").touch()
        client.start_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]})
        deadline = time.monotonic() + GENEROUS
        while "in block_the_loop" not in client.stderr()[before:] and time.monotonic() < deadline:
            time.sleep(0.1)
        stalled = client.stderr()[before:]
        assert "the event loop has not turned" in stalled
        assert "in block_the_loop" in stalled  # the loop thread's stack, where it is stuck
        closed = time.monotonic()
        assert client.close(timeout=GENEROUS) == 70  # FORCED_EXIT_CODE
        # Within the grace (2 s) plus the watchdog's tick and a loaded machine's scheduling.
        assert time.monotonic() - closed < 2 + 8
        assert "the orderly shutdown has not finished" in client.stderr()
        # The stall lasted several thresholds (1 s) past its report: reported once all the same.
        assert client.stderr()[before:].count("the event loop has not turned") == 1
        assert not _wait_gone(children, 30.0), "the kernel outlived the server"
        # The forced exit left its stall report: the stall that forced it, and where the loop was.
        report = json.loads((reports / f"stall-{client.proc.pid}.json").read_text())
        assert report["worst_stall_seconds"] >= 2
        assert "in block_the_loop" in report["stack"]
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()


def test_kernel_status_reports_the_worst_stall_since_start(tmp_path: Path) -> None:
    with ScriptedModelServer([], fallback=text("done")) as model:
        client, project = _blocked_server(tmp_path, model, CONTINUAL_ACP_STALL_SECONDS="1")
        try:
            initialize(client)
            sid, _ = new_session(client, project)
            (project / "BLOCK-THE-LOOP").write_text("2.5")
            assert prompt(client, sid, "stall once", timeout=GENEROUS).stop_reason == "end_turn"
            (project / "BLOCK-THE-LOOP").unlink()
            reply = run_command(client, sid, "/kernel status", timeout=GENEROUS)
        finally:
            client.close(timeout=GENEROUS)
    found = re.search(
        r"event loop: worst stall ([0-9.]+) s since start \(over the 1 s stall threshold\)", reply
    )
    assert found, reply
    assert float(found[1]) >= 2.5


PARENT = """
import subprocess, sys, time
out = open(sys.argv[1], "wb")
child = subprocess.Popen(sys.argv[2:], stdout=out)  # stdin inherited: the test holds its write end
print(child.pid, flush=True)
time.sleep(3600)
"""


def test_server_exits_when_its_parent_dies_while_its_stdin_stays_open(tmp_path: Path) -> None:
    """The editor's process dies while something else still holds the server's stdin open: the
    watchdog sees the parent change and the server shuts down."""
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "stdout"
    env = {**os.environ, **server_env(home, None, CONTINUAL_ACP_EXIT_GRACE_SECONDS="2")}
    read_end, write_end = os.pipe()
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(out), sys.executable, "-m", "acp_server"],
        stdin=read_end,
        stdout=subprocess.PIPE,
        env=env,
        cwd=str(tmp_path),
    )
    os.close(read_end)
    server_pid = 0
    try:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        os.write(
            write_end,
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
            b'"clientCapabilities":{},"clientInfo":{"name":"pytest","version":"1"}}}\n',
        )
        deadline = time.monotonic() + GENEROUS
        while b'"id":1' not in out.read_bytes().replace(b" ", b"") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b'"id":1' in out.read_bytes().replace(b" ", b""), "initialize was not answered"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert not _wait_gone({server_pid}, GENEROUS), "the server outlived its parent"
    finally:
        os.close(write_end)
        if parent.poll() is None:
            parent.kill()
        if server_pid and _alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)
