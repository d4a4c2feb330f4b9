"""Refinement in an eval never changes the task repository (a real server, kernel and skill check).

The scripted planner of `skill-writes` writes a skill whose example writes `stamped.txt` where it
runs; the server's skill check runs that example in the session's cwd, the task repository. The
eval puts the repository back after `/refine`, so the checker judges only what the prompt left.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import server_zygote

TASK = Path(__file__).parent / "tasks" / "skill-writes"
pytestmark = pytest.mark.timeout(600)


def test_a_skill_check_writing_into_the_task_repository_does_not_change_what_the_checker_sees(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "eval", str(TASK), "--scripted", "--arms", "learning",
         "--out", str(out), "--server-command", shlex.join(server_zygote.server_command())],
        capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    session = out / "traces" / "skill-writes" / "learning" / "session-1"
    diff = [json.loads(line) for line in (session / "harness-diff.jsonl").read_text().splitlines()]
    applied = [e for record in diff for e in record["applied_edits"] if e.get("applied")]
    # The skill was written, so its check (and the example that writes stamped.txt) ran.
    assert [e["kind"] for e in applied] == ["skill"], diff
    checker = json.loads((session / "checker.json").read_text())
    assert checker["passed"] is True, checker["output"]
    meta = json.loads((session / "session.json").read_text())
    assert meta["refine_changed_repo"] == ["stamped.txt"]
