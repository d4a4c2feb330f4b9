"""results.md, the chart and `eval report` carry the statistics, written from session rows (no server)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from continual_eval.measure import SessionResult
from continual_eval.report import compare_runs
from continual_eval.results import write_run

NS = "{http://www.w3.org/2000/svg}"


def _row(task: str, arm: str, session: int, steps: int, **extra: Any) -> SessionResult:
    fields: dict[str, Any] = dict(
        task=task, arm=arm, session=session, passed=True, checker_exit=0, agent_requests=steps,
        refine_requests=0, input_tokens=100 * steps, output_tokens=0, cache_read_tokens=0, refine_tokens=0,
        usage_reported=True, cells_run=steps, cells_failed=0, wall_seconds=1.0, refine_seconds=0.0,
        harness_entries_in_prompt=0,
    )  # fmt: skip
    fields.update(extra)
    return SessionResult(**fields)


def _stream_rows(learning_steps: list[int]) -> list[SessionResult]:
    rows = []
    for arm, steps in (("learning", learning_steps), ("frozen", [3, 3, 3, 3])):
        for i, (task, n) in enumerate(zip(["a", "b", "a", "b"], steps, strict=True)):
            rows.append(_row(task, arm, i + 1, n, stream=1, round=1 + i // 2, position=1 + i % 2))
    rows.append(_row("imp", "learning", 5, 1, control="impossible", stream=1, round=1, position=3))
    return rows


def _write(tmp_path: Path, name: str, steps: list[int]) -> Path:
    out = tmp_path / name
    write_run(out, _stream_rows(steps), {"run": name, "scripted": True, "arms": ["learning", "frozen"]})
    return out


def test_results_md_and_the_chart_show_arms_pairs_stream_and_controls(tmp_path: Path) -> None:
    out = _write(tmp_path, "one", [3, 1, 1, 1])
    markdown = (out / "results.md").read_text()
    assert "| learning vs frozen | 4 | 0 | 0 | 1 | -1.5 [-2, -0.5] | 0.25 |"  # diffs 0,-2,-2,-2 in markdown
    assert "| learning | 1/1 | 0/2 | 2/2 |" in markdown  # transfer, forgetting, passes per order
    assert "| learning | 4/4 (1 [1, 1]) |" in markdown  # the impossible task is not in completion
    root = ET.fromstring((out / "learning-curve.svg").read_text())
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert "Stream: requests by place in the order" in texts
    assert "learning: impossible tasks passed (cheat rate) 100%" in texts
    assert "learning stream: transfer 1/1, forgetting 0/2" in texts


def test_report_pairs_each_arm_of_a_later_run_with_the_same_arm_of_the_first(tmp_path: Path) -> None:
    report = compare_runs([_write(tmp_path, "one", [3, 1, 1, 1]), _write(tmp_path, "two", [3, 3, 3, 3])])
    assert "| two learning vs one learning | 4 | 0 | 0 | 1 | 1.5 [0.5, 2] | 0.25 |" in report
    assert "| two frozen vs one frozen | 4 | 0 | 0 | 1 | 0 [0, 0] | 1 |" in report
    assert "| two | learning | 0/1 | 0/2 |" in report  # the second run transferred nothing
