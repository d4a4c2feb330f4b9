"""`continual-acp eval --scripted` end to end: the real server over stdio, real kernels, the real harness
store, a scripted model whose replies depend on the harness section of the prompt it is sent.

These pin the pipeline (a refinement writes the lesson, the next session's prompt carries it, the
checker and the step count show it), not any model's quality.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import server_zygote

from continual_eval.measure import measure_session
from continual_eval.scripted import harness_section

TASKS = Path(__file__).parent / "tasks"
SUBSET = "readme-test-command"
# Each run is several server processes with a kernel each, one after another: on a loaded 2-core
# machine the module's runs take minutes, more than the suite's per-test default.
pytestmark = pytest.mark.timeout(600)


def _eval(*args: str, timeout: float = 540) -> subprocess.CompletedProcess[str]:
    # Servers forked from the worker's zygote where the suite forks servers (server_zygote.py).
    server = (
        [] if args[:1] == ("report",) else ["--server-command", shlex.join(server_zygote.server_command())]
    )
    return subprocess.run(
        [sys.executable, "-m", "acp_server", "eval", *args, *server],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("eval") / "subset"
    done = _eval(
        "--scripted", "--tasks", SUBSET, "--sessions", "2", "--arms", "learning,frozen", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))


def _row(document: dict[str, Any], arm: str, session: int) -> dict[str, Any]:
    return next(r for r in document["results"] if r["arm"] == arm and r["session"] == session)


def test_learning_session_two_carries_the_lesson_and_needs_fewer_requests(
    run: tuple[Path, dict[str, Any]],
) -> None:
    _, document = run
    first, second = _row(document, "learning", 1), _row(document, "learning", 2)
    assert first["harness_entries_in_prompt"] == 0
    assert len(first["refinements_applied"]) == 1
    assert second["harness_entries_in_prompt"] == 1
    assert second["passed"]
    assert second["agent_requests"] < first["agent_requests"]
    assert second["cells_run"] < first["cells_run"]


def test_frozen_arm_never_sees_a_harness_entry(run: tuple[Path, dict[str, Any]]) -> None:
    _, document = run
    frozen = [r for r in document["results"] if r["arm"] == "frozen"]
    assert [r["harness_entries_in_prompt"] for r in frozen] == [0, 0]
    assert [r["refine_requests"] for r in frozen] == [0, 0]
    assert (
        frozen[0]["agent_requests"]
        == frozen[1]["agent_requests"]
        > _row(document, "learning", 2)["agent_requests"]
    )


def test_traces_show_the_lesson_written_then_carried_in_the_next_prompt(
    run: tuple[Path, dict[str, Any]],
) -> None:
    out, _ = run
    arm = out / "traces" / SUBSET / "learning"
    diff = [json.loads(line) for line in (arm / "session-1" / "harness-diff.jsonl").read_text().splitlines()]
    lesson = diff[0]["applied_edits"][0]["content"]
    assert "./run-tests --fast" in lesson
    requests = [json.loads(line) for line in (arm / "session-2" / "model.jsonl").read_text().splitlines()]
    system = requests[0]["request"]["messages"][0]["content"]
    assert json.dumps(lesson)[1:-1] in harness_section(system)
    # The product's own per-entry usage ledger saw the lesson in session 2's prompt.
    usage = [json.loads(line) for line in (arm / "harness" / "entry-usage.jsonl").read_text().splitlines()]
    assert [record["entries"] for record in usage] == [[diff[0]["applied_edits"][0]["id"]]]
    frames = (arm / "session-2" / "frames.jsonl").read_text()
    assert '"session/prompt"' in frames and '"/refine --global' in frames


def test_every_figure_is_recomputed_from_the_trace_files(run: tuple[Path, dict[str, Any]]) -> None:
    out, document = run
    for row in document["results"]:
        folder = out / "traces" / row["task"] / row["arm"] / f"session-{row['session']}"
        again = measure_session(folder, task=row["task"], arm=row["arm"], session=row["session"]).to_json()
        assert again == row


def test_results_are_labelled_a_pipeline_test_and_the_chart_is_svg(run: tuple[Path, dict[str, Any]]) -> None:
    out, document = run
    assert document["label"].startswith("PIPELINE TEST")
    markdown = (out / "results.md").read_text()
    assert "PIPELINE TEST" in markdown
    assert "| readme-test-command | PP | PP |" in markdown
    root = ET.fromstring((out / "learning-curve.svg").read_text())
    assert len(root.findall("{http://www.w3.org/2000/svg}polyline")) == 6  # 3 panels x 2 arms


def test_report_compares_runs_side_by_side(run: tuple[Path, dict[str, Any]]) -> None:
    out, _ = run
    done = _eval("report", str(out), str(out), timeout=60)
    assert done.returncode == 0, done.stderr
    # The first table's rows (the statistics tables below it start with the run's name too).
    rows = [line for line in done.stdout.splitlines() if line.startswith(f"| {out.name} | pipeline test")]
    assert len(rows) == 4  # two runs x two arms
    assert f"| {out.name}#2 learning vs {out.name} learning | 2 | 0 | 0 | 1 | 0 [0, 0] | 1 |" in done.stdout
    assert "| learning | 1/1 1/1 |" in rows[0]
    assert f"| {SUBSET} | PP | PP | PP | PP |" in done.stdout  # per task: two runs x two arms


def test_a_refinement_that_breaks_a_passing_task_is_flagged_and_can_be_replayed_without(
    tmp_path: Path,
) -> None:
    out = tmp_path / "bad"
    done = _eval(str(TASKS / "bad-lesson"), "--scripted", "--arms", "learning", "--out", str(out))
    assert done.returncode == 0, done.stderr[-4000:]
    document = json.loads((out / "results.json").read_text())
    applied = _row(document, "learning", 1)["refinements_applied"]
    assert [r["passed"] for r in document["results"]] == [True, False]
    assert document["regressions"] == [
        {"task": "bad-lesson", "arm": "learning", "session": 2, "refinement_ids": applied}
    ]
    assert applied[0] in (out / "results.md").read_text()
    assert (
        f"regression: bad-lesson (learning) failed in session 2 after refinement(s) {applied[0]}"
        in done.stderr
    )

    replay = tmp_path / "replay"
    done = _eval(
        str(TASKS / "bad-lesson"), "--scripted", "--sessions", "1", "--without", applied[0],
        "--from", str(out), "--out", str(replay),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    replayed = json.loads((replay / "results.json").read_text())
    assert replayed["replayed_from"] == str(out)
    (row,) = replayed["results"]
    assert row["arm"] == f"without-{applied[0]}"
    assert row["passed"] is True  # the recorded arm failed with the refinement; without it the task passes
    assert row["harness_entries_in_prompt"] == 0


def test_a_real_endpoint_is_measured_through_the_recording_proxy(tmp_path: Path) -> None:
    """`--base-url/--model`: no task script; every request and the usage it reported land in the traces."""
    from agent_core.testing.scripted_model import ScriptedModelServer, text, usage

    out = tmp_path / "real"
    reply = text("I would rather not.", usage=usage(120, 7, cached_tokens=100))
    with ScriptedModelServer(models=["some-model"], fallback=reply) as endpoint:
        url = endpoint.base_url
        done = _eval(
            str(TASKS / "bad-lesson"), "--base-url", url, "--model", "some-model",
            "--arms", "frozen", "--sessions", "1", "--out", str(out),
            "--max-turn-requests", "3", "--prompt-timeout", "300",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:]
        sent = [r for r in endpoint.requests if r.get("model") == "some-model"]
    document = json.loads((out / "results.json").read_text())
    assert not document["scripted"]
    assert document["label"] == f"Model: some-model at {url}"
    (row,) = document["results"]
    assert row["passed"] is False  # it answered without doing the task
    assert row["agent_requests"] == len(sent) == 1
    assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"]) == (20, 100, 7)
    assert row["usage_reported"] is True
    meta = json.loads((out / "traces" / "bad-lesson" / "frozen" / "session-1" / "session.json").read_text())
    assert meta["limits"] == {"max_turn_requests": 3, "prompt_timeout": 300.0}
