"""`refine_verify = "replay"` end to end: the real server over stdio, a real git repository, real
kernels for the replay children, real gates; the scripted model fixes the code only when the edit is
in its harness prompt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent_core.testing.scripted_model import Response, ScriptedModelServer, text, tool_call
from tests.git_project import failing_calc_project, git

from .acp_support import new_session, prompt, refinement_cards, servers

MARK = "calc.add must return a + b"
FIX_CELL = "open('calc.py', 'w').write('def add(a, b):\\n    return a + b\\n')"
# Judges the same fix as the project's pytest gate, without a pytest start per replay.
# (Gates run with PYTHONSAFEPATH=1: the checkout's folder is put on the path by hand.)
CHECK = (
    "import sys; sys.path.insert(0, ''); import calc; ok = calc.add(2, 3) == 5; "
    "print('fixed' if ok else 'still broken'); sys.exit(not ok)"
)
GATE = f'{sys.executable} -c "{CHECK}"'


def _replay_child(body: dict[str, Any]) -> Response:
    """The replay children's model: a first request whose harness prompt holds the edit fixes the
    code, one without it only looks; a request after the cell ends the turn."""
    messages = body["messages"]
    if any(m.get("role") == "tool" for m in messages):
        return text("Done.")
    system = str(messages[0].get("content") or "")
    return tool_call(FIX_CELL, "fix add") if MARK in system else tool_call("print('looked')", "look")


def test_a_proposed_fix_applies_when_its_replay_passes_the_gates_only_with_the_edit(tmp_path: Path) -> None:
    repo = failing_calc_project(tmp_path)
    (repo / ".continual-acp" / "gates.toml").write_text(
        f"[[gate]]\ncommand = {json.dumps(GATE)}\ntimeout = 60\n"
    )
    git(repo, "commit", "-q", "-am", "a quick gate")
    config = 'auto_refine_every = 0\nrefine_verify = "replay"\n'
    with (
        ScriptedModelServer(responder=_replay_child) as model,
        servers(tmp_path / "home", model.base_url, config=config) as group,
    ):
        client = group.spawn(repo)
        sid, _ = new_session(client, repo)
        model.push(
            tool_call("import calc\nassert calc.add(2, 3) == 5, 'add is wrong'", "check add"),
            text("add is wrong."),
        )
        prompt(client, sid, "Make calc.add(2, 3) return 5.")
        [failed] = [
            u
            for u in client.updates(sid)
            if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed"
        ]
        plan = {
            "summary": "Remember how add must work",
            "rationale": "the check failed",
            "fixes": failed["toolCallId"],
            "edits": [{"action": "create", "kind": "memory", "title": "Add", "content": MARK}],
        }
        model.push(text(json.dumps(plan)))
        prompt(client, sid, "/refine", timeout=180)

        [card] = refinement_cards(client, sid)
        shown = "\n".join(str(c.get("content", {}).get("text", "")) for c in card.get("content", []))
        assert card["rawOutput"]["applied"] is True, shown
        assert "**Replay verdict:** helps" in shown
        assert "**Replay with the edit:** gates passed" in shown and "fixed" in shown
        assert "**Replay without the edit:** gates failed" in shown and "still broken" in shown
        assert "**Replay cost:** 4 model requests" in shown
        state = client.request("_harness/state", {"sessionId": sid, "scope": "local"})
        assert [e["content"] for e in state["entries"]] == [MARK]
    # The task's repository: its working tree and index as they were, no replay checkout left.
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == "" and (repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True)
    assert len(listed.stdout.splitlines()) == 1
