"""The `learning+curate` arm in stream mode end to end: the real server over stdio, the real
harness store and the `harness curate` CLI, the scripted model. Two tasks learn the same lesson
under two titles (tests/eval/curate-suite). Up to the first pass the arm is `learning` itself (same
sessions, same refinements), so the harness the second session leaves is the one `learning` carries
on with; the pass merges its duplicate out of the prompt, and the results say so. One arm only, to
stay cheap."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import server_zygote

from harness_store import HarnessStore

SUITE = Path(__file__).parent / "curate-suite"
pytestmark = pytest.mark.timeout(300)


def _live(snapshot: Path) -> dict[str, str]:
    """Memory id -> trust, in a session's `harness-after` snapshot."""
    return {key: e.trust for key, e in HarnessStore(snapshot).load().entries.get("memory", {}).items()}


def test_the_curate_arm_merges_a_learned_duplicate_out_of_the_prompt_between_sessions(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable, "-m", "acp_server", "eval", "--scripted", str(SUITE), "--mode", "stream",
            "--orders", "1", "--arms", "learning+curate", "--out", str(out),
            "--server-command", shlex.join(server_zygote.server_command()),
        ],
        capture_output=True,
        text=True,
        timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    traces = out / "traces" / "stream-1" / "learning+curate"
    alpha, beta = "results_the_alpha_note", "results_the_beta_note"
    # what `learning` carries into the third session: both lessons, live
    assert _live(traces / "02-dup-b" / "harness-after") == {alpha: "verified", beta: "verified"}
    report = json.loads((traces / "03-dup-a" / "curate.json").read_text())
    assert [(a["action"], a["id"], a["target"]) for a in report["actions"]] == [("merge", beta, alpha)]
    assert not (traces / "01-dup-a" / "curate.json").exists()  # nothing runs before the first session
    document = json.loads((out / "results.json").read_text())
    rows = {r["session"]: r for r in document["results"]}
    assert len(rows[2]["entries_shown"]) == 1 and rows[2]["curated"] == 0
    assert rows[3]["entries_shown"] == [alpha] and rows[3]["curated"] == 1
    figures = document["analysis"]["arms"]["learning+curate"]
    assert figures["curated"] >= 1 and figures["completion"]["passed"] == 4
