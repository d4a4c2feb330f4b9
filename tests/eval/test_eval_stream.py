"""Stream mode, `--jobs` and `--resume` end to end: the real server over stdio, real kernels, the real
harness store, the scripted model (a pipeline test, never a model's quality).

Two variants of one lesson (tests/eval/stream-suite): in a stream, the second task profits from what
the first taught (forward transfer); the re-run round shows nothing forgotten. Two runs only, to stay
cheap: one serial, interrupted after its second session and resumed; one with --jobs 2. Their
results files must be the same (timings and the time-stamped refinement ids aside).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import server_zygote

SUITE = Path(__file__).parent / "stream-suite"
ARGS = ("--scripted", str(SUITE), "--mode", "stream", "--orders", "1", "--arms", "learning,frozen")
pytestmark = pytest.mark.timeout(600)


def _command(*args: str) -> list[str]:
    # The eval's servers fork from the worker's zygote where the suite forks servers (server_zygote.py).
    # The run this file kills (its process group, SIGKILL) takes its servers with it all the same: the
    # launchers are in that group, the zygote kills a dead launcher's server, and a server's stderr
    # (server.log) goes through its launcher, so nothing of the killed run is written after it died.
    return [
        sys.executable,
        "-m",
        "acp_server",
        "eval",
        *args,
        "--server-command",
        shlex.join(server_zygote.server_command()),
    ]


def _comparable(out: Path) -> str:
    """results.json without what differs from run to run: when and where it ran, timings, and the
    refinement ids (they carry the time)."""
    document = json.loads((out / "results.json").read_text())
    for key in ("written", "run", "machine"):
        document.pop(key)
    for row in document["results"]:
        row.pop("wall_seconds")
        row.pop("refine_seconds")
    return re.sub(r"r-\d{8}-\d{9}-[0-9a-f]{8}", "r-ID", json.dumps(document, sort_keys=True))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    base = tmp_path_factory.mktemp("stream")
    resumed, parallel = base / "resumed", base / "parallel"
    # Interrupted: killed once its second session (the one that carries session 1's lesson) is done.
    proc = subprocess.Popen(
        _command(*ARGS, "--out", str(resumed)),
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "session 2:" in line:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert any("session 2: pass" in line for line in seen), "".join(seen)[-3000:]
    assert not (resumed / "results.json").exists()
    first_frames = (resumed / "traces" / "stream-1" / "learning" / "01-note-a" / "frames.jsonl").read_bytes()
    done = subprocess.run(
        _command(*ARGS, "--out", str(resumed), "--resume"),
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # Finished sessions are read back, never re-run.
    assert (
        resumed / "traces" / "stream-1" / "learning" / "01-note-a" / "frames.jsonl"
    ).read_bytes() == first_frames
    assert "learning   session 1:" not in done.stderr
    done = subprocess.run(
        _command(*ARGS, "--out", str(parallel), "--jobs", "2"),
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return resumed, parallel, done.stderr


def _document(out: Path) -> dict[str, Any]:
    return json.loads((out / "results.json").read_text())


def test_a_resumed_serial_run_and_a_parallel_run_give_the_same_results(runs: tuple[Path, Path, str]) -> None:
    resumed, parallel, _ = runs
    assert len(_document(parallel)["results"]) == 8
    assert _comparable(resumed) == _comparable(parallel)


def test_one_harness_carries_a_lesson_from_one_task_of_the_stream_to_the_next(
    runs: tuple[Path, Path, str],
) -> None:
    _, parallel, _ = runs
    rows = [r for r in _document(parallel)["results"] if r["arm"] == "learning"]
    assert [(r["task"], r["round"], r["position"]) for r in rows] == [
        ("note-a", 1, 1), ("note-b", 1, 2), ("note-a", 2, 1), ("note-b", 2, 2),
    ]  # fmt: skip
    assert [r["agent_requests"] for r in rows] == [3, 2, 2, 2]
    # note-b never ran before in this stream: its prompt shows note-a's lesson, and a cell follows it.
    assert rows[1]["entries_shown"] == rows[1]["entries_followed"] != []
    assert rows[0]["entries_shown"] == []


def test_the_stream_reports_forward_transfer_forgetting_and_order(runs: tuple[Path, Path, str]) -> None:
    _, parallel, _ = runs
    analysis = _document(parallel)["analysis"]
    stream = analysis["stream"]["learning"]
    assert stream["forward_transfer"]["count"] == stream["forward_transfer"]["eligible"] == 1
    assert stream["forward_transfer"]["cases"][0]["task"] == "note-b"
    assert (stream["forgetting"]["count"], stream["forgetting"]["eligible"]) == (0, 2)
    assert stream["order_effects"]["passed_per_order"] == {"1": 2}
    assert analysis["arms"]["frozen"]["lesson_use"]["entries_shown"] == 0
    (comparison,) = analysis["comparisons"]
    assert (comparison["a"], comparison["pairs"], comparison["steps_diff"]["mean"]) == ("learning", 4, -0.75)


def test_the_cost_so_far_shows_on_stderr_as_the_run_goes(runs: tuple[Path, Path, str]) -> None:
    _, _, stderr = runs
    sessions = [int(n) for n in re.findall(r"session \d+: .*\[cost so far: (\d+) requests", stderr)]
    assert len(sessions) == 8  # on each session's line
    every = [int(n) for n in re.findall(r"^cost so far: (\d+) requests, \d+ tokens$", stderr, re.MULTILINE)]
    assert every and all(n % 10 == 0 for n in every)  # and every 10 requests while a session runs
    total = re.findall(r"^cost so far: (\d+) requests, \d+ tokens \(this process\)$", stderr, re.MULTILINE)
    assert [int(n) for n in total] == [max(sessions)] != [0]


def test_the_misleading_arm_starts_from_the_tasks_wrong_lesson_and_reports_it_unfollowed(
    tmp_path: Path,
) -> None:
    out = tmp_path / "misleading"
    done = subprocess.run(
        _command("--scripted", str(SUITE), "--arms", "misleading", "--sessions", "1", "--out", str(out)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "note-b                       misleading skipped: the task has no misleading.json" in done.stderr
    (row,) = _document(out)["results"]
    assert row["task"] == "note-a"
    assert row["entries_shown"] == ["results_are_marked_done"]
    assert row["entries_followed"] == []  # the scripted agent never wrote `done`
    assert row["refine_requests"] > 0  # the arm learns after the wrong seed
