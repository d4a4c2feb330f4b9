"""`session/fork` of a session another server process has open (an editor's second server, as
agent-shell's fork starts): read from disk without the source's owner lock, the source untouched."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session, prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

PROBE = "print(sorted(n for n in ('x', 'y') if n in globals()))"


def _cell(client: AcpClient, model: ScriptedModelServer, sid: str, words: str, code: str) -> None:
    model.push(tool_call(code), text("done"))
    assert prompt(client, sid, words).stop_reason == "end_turn"


def _wait_for_saved(manifest: Path, name: str, timeout: float = 30.0) -> None:
    """Until the source's snapshot on disk holds `name` (snapshots are written after cells)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if name in json.loads(manifest.read_text()).get("saved", {}):
                return
        except (OSError, ValueError):
            pass
        assert time.monotonic() < deadline, f"{manifest} never saved {name}"
        threading.Event().wait(0.05)


def test_a_session_open_in_another_process_forks_from_its_transcript_and_snapshot(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    home = tmp_path / "shared-home"
    home.mkdir()
    first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(first)
    initialize(second)
    work = tmp_path / "work"
    work.mkdir()
    source, _ = new_session(first, str(work))
    _cell(first, model, source, "first: set x", "x = 1")
    _cell(first, model, source, "second: set y", "y = 2")
    _wait_for_saved(home / "sessions" / source / "kernel-state.json", "y")
    answer = second.request("session/fork", {"sessionId": source, "cwd": str(work), "mcpServers": []})
    fork = answer["sessionId"]
    assert fork != source and answer["_meta"]["continual-acp"]["forkedFrom"] == source
    assert answer["_meta"]["continual-acp"]["kernel"] == "kernel variables as they are now: x, y"
    model.push(tool_call(PROBE), text("probed"))
    assert prompt(second, fork, "which names?").stop_reason == "end_turn"
    assert "['x', 'y']" in str(model.requests[-1]["messages"][-1]["content"])
    users = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert [str(u).split("\n")[0] for u in users[:2]] == ["first: set x", "second: set y"]
    # The source is still the first process's, and goes on there.
    _cell(first, model, source, "third: still here", "x = 5")
    assert (home / "sessions" / source / "owner.lock").exists()


def test_a_fork_before_a_prompt_of_a_session_open_elsewhere_gets_that_prompts_checkpoint(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    home = tmp_path / "shared-home"
    home.mkdir()
    first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(first)
    initialize(second)
    source, _ = new_session(first, str(tmp_path))
    _cell(first, model, source, "first: set x", "x = 1")
    _cell(first, model, source, "second: set y", "y = 2")
    answer = second.request(
        "session/fork",
        {
            "sessionId": source,
            "cwd": str(tmp_path),
            "mcpServers": [],
            "_meta": {"continual-acp": {"beforePrompt": 1}},
        },
    )
    assert answer["_meta"]["continual-acp"]["kernel"] == "kernel variables from before that prompt: x"
    model.push(tool_call(PROBE), text("probed"))
    assert prompt(second, answer["sessionId"], "which names?").stop_reason == "end_turn"
    assert "['x']" in str(model.requests[-1]["messages"][-1]["content"])
