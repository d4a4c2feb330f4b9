"""Autonomous mode and goals over real stdio: a real server, the scripted model, real gate processes
in a real git repository.

The scripted model fixes a failing test through kernel cells that write the file; the loop ends when
`pytest` (a real process) passes. Other tests pin the spin guard, limits, cancel during a gate,
budgets that exclude cache reads, goal persistence across a restart, and gate confirmation.

The tests that need only a fresh session share one server (`served`, a session in each test's own
project); those that restart or kill the server or change its config start their own (`spawn`).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, select
from acp_helpers import ClientFactory, initialize, new_session, prompt, run_command
from git_project import failing_calc_project
from shared_server import Here, SharedServers, shared_servers

from agent_core.testing.scripted_model import ScriptedModelServer, stall, text, tool_call, usage

Serve = Callable[..., Here]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    with shared_servers(tmp_path_factory) as made:
        yield made


@pytest.fixture
def served(servers: SharedServers, tmp_path: Path) -> Iterator[Serve]:
    """A session on the module's server (default configuration) for a test that needs nothing else."""
    with servers.test(tmp_path) as open_session:
        yield open_session


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repo whose one test fails: calc.add subtracts."""
    return failing_calc_project(tmp_path)


def _write(path: Path, content: str) -> str:
    return f"open({str(path)!r}, 'w').write({content!r})"


def _autonomous(client: AcpClient, sid: str) -> None:
    client.request("session/set_mode", {"sessionId": sid, "modeId": "autonomous"})


def _gate_cards(client: AcpClient, sid: str) -> dict[str, list[dict[str, Any]]]:
    cards: dict[str, list[dict[str, Any]]] = {}
    for update in client.updates(sid):
        call = update.get("toolCallId", "")
        if call.startswith("gate_"):
            cards.setdefault(call, []).append(update)
    return cards


def _agent_text(client: AcpClient, sid: str) -> str:
    return "".join(
        u["content"]["text"] for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"
    )


def test_the_loop_fixes_a_failing_test_over_two_continuations_and_ends_when_pytest_passes(
    served: Serve, project: Path
) -> None:
    here = served(session_cwd=project)
    client, sid = here.client, here.sid
    model = here.model
    model.push(
        text("Done, it should pass now."),  # a claim with no change: the gate fails
        tool_call(_write(project / "calc.py", "def add(a, b):\n    return a * b\n"), title="try *"),
        text("Fixed."),
        tool_call(_write(project / "calc.py", "def add(a, b):\n    return a + b\n"), title="use +"),
        text("Fixed for real."),
    )
    _autonomous(client, sid)
    stop, _ = prompt(client, sid, "make the tests pass", timeout=120)
    assert stop == "end_turn"
    assert "return a + b" in (project / "calc.py").read_text()
    cards = _gate_cards(client, sid)
    finals = [updates[-1] for updates in cards.values()]
    assert [f["status"] for f in finals] == ["failed", "failed", "completed"]
    starts = [updates[0] for updates in cards.values()]
    assert all(s["title"].startswith("Gate: ") and s["kind"] == "execute" for s in starts)
    assert finals[0]["rawOutput"]["exitCode"] == 1
    said = _agent_text(client, sid)
    assert "Continuing 1/20: gate" in said and "Continuing 2/20: gate" in said
    assert "All gates passed" in said
    # The continuation prompt told the model what failed and that the verifier decides.
    continuation = here.requests()[1]["messages"][-1]["content"]
    assert "Missing terminal evidence" in str(continuation) and "assert" in str(continuation)


def test_a_model_that_changes_nothing_is_not_regated_and_the_loop_ends_after_two_spins(
    served: Serve, project: Path
) -> None:
    here = served(session_cwd=project)
    client, sid = here.client, here.sid
    model = here.model
    model.push(text("Done."), text("Done, really."), text("Still done."))
    _autonomous(client, sid)
    stop, _ = prompt(client, sid, "make the tests pass", timeout=120)
    assert stop == "end_turn"
    finals = [updates[-1] for updates in _gate_cards(client, sid).values()]
    assert [f["rawOutput"]["notRerun"] for f in finals] == [False, True, True]
    assert "not rerun: workspace unchanged" in str(finals[1]["content"])
    assert "did not change across 2 attempts" in _agent_text(client, sid)
    assert "not rerun: workspace unchanged" in str(here.requests()[2]["messages"][-1]["content"])
    assert model.remaining == 0


def test_the_continuation_limit_ends_with_max_turn_requests_naming_it(
    spawn: ClientFactory, model: ScriptedModelServer, project: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("autonomous_max_continuations = 1\n")
    model.push(
        tool_call(_write(project / "calc.py", "def add(a, b):\n    return 0\n")),
        text("try 1"),
        tool_call(_write(project / "calc.py", "def add(a, b):\n    return 1\n")),
        text("try 2"),
    )
    client = spawn(model.base_url, CONTINUAL_ACP_CONFIG=str(config))
    initialize(client)
    sid, _ = new_session(client, str(project))
    _autonomous(client, sid)
    stop, _ = prompt(client, sid, "make the tests pass", timeout=120)
    assert stop == "max_turn_requests"
    assert "limit max_continuations = 1" in _agent_text(client, sid)


def test_cancel_during_a_gate_stops_the_loop_and_kills_the_gate_within_a_second(
    served: Serve, project: Path
) -> None:
    gate = "echo GATE-RUNNING && sleep 60"
    (project / ".continual-acp" / "gates.toml").write_text(f"gates = [{gate!r}]\n")
    here = served(session_cwd=project)
    client, sid = here.client, here.sid
    model = here.model
    model.push(text("Done."))
    _autonomous(client, sid)
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    )
    here.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"].get("toolCallId", "").startswith("gate_")
            and m["params"]["update"].get("status") == "in_progress"
        ),
        timeout=60,
    )
    started = time.monotonic()
    client.notify("session/cancel", {"sessionId": sid})
    frame = client.response_frame(rid, timeout=10)
    assert time.monotonic() - started < 1.0
    assert frame.message["result"]["stopReason"] == "cancelled"
    leftovers = subprocess.run(["pgrep", "-f", "sleep 60"], capture_output=True, text=True).stdout.split()
    assert [pid for pid in leftovers if _cwd_of(pid) == str(project)] == []


def _cwd_of(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def test_goal_budget_counts_input_output_and_cache_writes_but_not_cache_reads(
    served: Serve, tmp_path: Path
) -> None:
    # prompt 1000 of which 800 read from cache and 50 written to it; 100 out: billable 200 + 100 + 50.
    here = served(session_cwd=tmp_path)
    client, sid = here.client, here.sid
    model = here.model
    model.push(text("ok", usage=usage(1000, 100, cached_tokens=800, cache_write_tokens=50)))
    assert "budget of 10,000 tokens" in run_command(client, sid, "/goal ship the release --budget 10k")
    assert prompt(client, sid, "work on it")[0] == "end_turn"
    status = run_command(client, sid, "/goal status")
    assert "350 of 10,000 tokens used (9,650 left)" in status
    assert "cache reads: 800 tokens" in status
    # The model saw the goal block with the turn.
    assert "Objective: ship the release" in str(here.requests()[0]["messages"][-1]["content"])


def test_a_goal_survives_a_server_restart_and_session_load(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    home = tmp_path / "home-shared"
    home.mkdir()
    first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(first)
    sid, _ = new_session(first, str(tmp_path))
    run_command(first, sid, "/goal keep the docs in sync --budget 5000")
    assert first.close() == 0
    second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(second)
    second.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    infos = [
        u["_meta"]["continual-acp"]["goal"]
        for u in second.updates(sid)
        if u["sessionUpdate"] == "session_info_update"
        and "goal" in u.get("_meta", {}).get("continual-acp", {})
    ]
    assert infos and infos[-1]["objective"] == "keep the docs in sync"
    assert "Goal (active): keep the docs in sync" in run_command(second, sid, "/goal status")


def test_autonomous_on_without_gates_proposes_detected_ones_and_asks_to_confirm(
    served: Serve, tmp_path: Path
) -> None:
    repo = tmp_path / "pyproj"
    repo.mkdir()
    (repo / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    here = served(session_cwd=repo)
    client, sid = here.client, here.sid
    client.permission_policy = select("allow_once")
    reply = run_command(client, sid, "/autonomous on")
    asks = [r for r in here.agent_requests() if r["method"] == "session/request_permission"]
    assert len(asks) == 1
    assert "python3 -m pytest -q" in str(asks[0]["params"]["toolCall"]["content"])
    assert "Autonomous mode is on" in reply and "`python3 -m pytest -q` (session" in reply
    assert any(u.get("currentModeId") == "autonomous" for u in client.updates(sid))


def test_declining_the_proposed_gates_keeps_autonomous_mode_off(served: Serve, tmp_path: Path) -> None:
    repo = tmp_path / "pyproj"
    repo.mkdir()
    (repo / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    here = served(session_cwd=repo)
    client, sid = here.client, here.sid
    client.permission_policy = select("reject")
    reply = run_command(client, sid, "/autonomous on")
    assert "stays off" in reply
    assert "off (mode: auto)" in run_command(client, sid, "/autonomous status")


def test_autonomous_on_with_nothing_detected_explains_how_to_add_a_gate(
    served: Serve, tmp_path: Path
) -> None:
    here = served(session_cwd=tmp_path)
    client, sid = here.client, here.sid
    reply = run_command(client, sid, "/autonomous on")
    assert "/autonomous gate add <command>" in reply
    assert not [r for r in here.agent_requests() if r["method"] == "session/request_permission"]


def test_gate_add_list_and_remove_over_slash_commands(served: Serve, tmp_path: Path) -> None:
    here = served(session_cwd=tmp_path)
    client, sid = here.client, here.sid
    assert "Added gate `make check`" in run_command(client, sid, "/autonomous gate add make check")
    assert "- `make check` (session, timeout 600 s)" in run_command(client, sid, "/autonomous gate list")
    assert "Removed gate `make check`" in run_command(client, sid, "/autonomous gate remove make check")
    assert "No gates configured." in run_command(client, sid, "/autonomous gate list")


def test_a_cell_sets_and_completes_the_goal_through_the_kernel_goal_skill(
    served: Serve, tmp_path: Path
) -> None:
    here = served(session_cwd=tmp_path)
    client, sid = here.client, here.sid
    model = here.model
    model.push(
        tool_call("print(goal.set('green build', token_budget=900)['objective'])", title="set goal"),
        tool_call("print(goal.complete('all green')['state'])", title="complete"),
        text("done"),
    )
    assert prompt(client, sid, "set a goal")[0] == "end_turn"
    tool_results = [m["content"] for m in here.requests()[-1]["messages"] if m["role"] == "tool"]
    assert "green build" in tool_results[0] and "complete" in tool_results[1]
    assert "Goal (complete): green build" in run_command(client, sid, "/goal status")
    plans = [u for u in client.updates(sid) if u["sessionUpdate"] == "plan"]
    assert plans[-1]["entries"][0]["status"] == "completed"


def test_session_load_replays_the_loop_with_its_gate_cards(
    spawn: ClientFactory, model: ScriptedModelServer, project: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home-replay"
    home.mkdir()
    model.push(
        text("Done."),
        tool_call(_write(project / "calc.py", "def add(a, b):\n    return a + b\n"), title="fix"),
        text("Fixed."),
    )
    first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(first)
    sid, _ = new_session(first, str(project))
    _autonomous(first, sid)
    assert prompt(first, sid, "make the tests pass", timeout=120)[0] == "end_turn"
    live = [u[-1]["status"] for u in _gate_cards(first, sid).values()]
    assert first.close() == 0
    second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(second)
    second.request("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
    replayed = [u[-1]["status"] for u in _gate_cards(second, sid).values()]
    assert replayed == live == ["failed", "completed"]
    assert "Continuing 1/20" in _agent_text(second, sid)


def test_a_server_killed_mid_loop_leaves_the_session_loadable_with_the_goal_and_says_how_to_go_on(
    spawn: ClientFactory, model: ScriptedModelServer, project: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home-kill"
    home.mkdir()
    (project / ".continual-acp" / "gates.toml").write_text('gates = ["echo GATE-RUNNING && sleep 60"]\n')
    model.push(text("Done."))
    first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(first)
    sid, _ = new_session(first, str(project))
    run_command(first, sid, "/goal make the tests pass")
    _autonomous(first, sid)
    first.start_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    # The gate's output, not its card: the card (the command in it) goes out before the server
    # starts the gate's process. A kill then can catch a child between fork and exec, which outlives
    # the server holding a copy of its descriptors, the session's owner lock among them.
    first.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") == "tool_call_update"
            and "GATE-RUNNING" in str(m["params"]["update"].get("content"))
        ),
        timeout=60,
    )
    first.proc.kill()
    first.proc.wait(10)
    second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(second)
    second.request("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
    said = _agent_text(second, sid)
    assert "interrupted by a server restart" in said
    assert "(make the tests pass)" in said
    assert "Goal (active): make the tests pass" in run_command(second, sid, "/goal status")


def test_cancel_during_a_model_turn_stops_the_loop_within_a_second_and_runs_no_gate(
    served: Serve, project: Path
) -> None:
    here = served(session_cwd=project)
    client, sid = here.client, here.sid
    model = here.model
    model.push(stall(60, before="Working on it"))
    _autonomous(client, sid)
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    )
    here.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            and "Working on it" in m["params"]["update"]["content"]["text"]
        ),
        timeout=60,
    )
    started = time.monotonic()
    client.notify("session/cancel", {"sessionId": sid})
    frame = client.response_frame(rid, timeout=10)
    assert time.monotonic() - started < 1.0
    assert frame.message["result"]["stopReason"] == "cancelled"
    assert _gate_cards(client, sid) == {}
    assert here.wait_for_disconnects(1, timeout=10)
