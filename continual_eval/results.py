"""A run's outputs: results.json, results.md (the table), learning-curve.svg, regressions.

A **regression** is a refinement after which a task that passed starts failing: in an arm that
refines, session k passed and session k+1 failed, and refinements were applied in between (session
k's); each such refinement id is named, so `--without <id>` can replay the task without it.
"""

from __future__ import annotations

import itertools
import json
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from continual_eval.analysis import analyse
from continual_eval.chart import Panel, Series, render_svg
from continual_eval.measure import SessionResult

PIPELINE_LABEL = (
    "PIPELINE TEST: scripted model. These numbers show that the harness machinery works end to end "
    "(a refinement writes the lesson, the next session's prompt carries it); they say nothing about "
    "any model's quality."
)


@dataclass(frozen=True)
class Regression:
    task: str
    arm: str
    session: int  # the first failing session
    refinement_ids: tuple[str, ...]


def find_regressions(results: Sequence[SessionResult]) -> list[Regression]:
    by_arm: dict[tuple[str, str], list[SessionResult]] = {}
    for result in results:
        by_arm.setdefault((result.task, result.arm), []).append(result)
    found: list[Regression] = []
    for (task, arm), rows in by_arm.items():
        rows = sorted(rows, key=lambda r: r.session)
        for before, after in itertools.pairwise(rows):
            if before.passed and not after.passed and before.refinements_applied:
                found.append(Regression(task, arm, after.session, tuple(before.refinements_applied)))
    return found


def summary(results: Sequence[SessionResult]) -> dict[str, dict[int, dict[str, float]]]:
    """arm -> session -> totals over tasks: passed, tasks, tokens, agent_requests, cells_failed."""
    out: dict[str, dict[int, dict[str, float]]] = {}
    for r in results:
        row = out.setdefault(r.arm, {}).setdefault(
            r.session, {"passed": 0, "tasks": 0, "tokens": 0, "agent_requests": 0, "cells_failed": 0}
        )
        row["passed"] += int(r.passed)
        row["tasks"] += 1
        row["tokens"] += r.tokens
        row["agent_requests"] += r.agent_requests
        row["cells_failed"] += r.cells_failed
    return out


def chart(results: Sequence[SessionResult], *, title: str, subtitle: str, notes: Sequence[str] = ()) -> str:
    totals = summary(results)
    arms = list(totals)
    tasks = max((int(row["tasks"]) for arm in totals.values() for row in arm.values()), default=1)
    passes = [
        Series(arm, [(s, row["passed"]) for s, row in sorted(totals[arm].items())], dashed=arm == "seeded")
        for arm in arms
    ]
    tokens = [
        Series(arm, [(s, row["tokens"]) for s, row in sorted(totals[arm].items())], dashed=arm == "seeded")
        for arm in arms
    ]
    requests = [
        Series(
            arm,
            [(s, row["agent_requests"]) for s, row in sorted(totals[arm].items())],
            dashed=arm == "seeded",
        )
        for arm in arms
    ]
    return render_svg(
        [
            Panel("Checker passes", f"tasks passed (of {tasks})", passes, y_min=0, y_max=tasks, notes=notes),
            Panel("Tokens (input + output)", "tokens, all tasks (refinement included)", tokens, y_min=0),
            Panel("Model requests of the agent", "requests, all tasks", requests, y_min=0),
        ],
        title=title,
        subtitle=subtitle,
        x_label="session",
    )


def table(results: Sequence[SessionResult]) -> str:
    head = (
        "| task | arm | session | pass | agent requests | refine requests | input tokens | output tokens | "
        "cache reads | cells run | cells failed | wall s | entries in prompt | refinements applied |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = [
        f"| {r.task} | {r.arm} | {r.session} | {'pass' if r.passed else 'FAIL'} | {r.agent_requests} | "
        f"{r.refine_requests} | {r.input_tokens} | {r.output_tokens} | {r.cache_read_tokens} | {r.cells_run} | "
        f"{r.cells_failed} | {r.wall_seconds:.1f} | {r.harness_entries_in_prompt} | "
        f"{', '.join(r.refinements_applied) or '-'} |"
        for r in results
    ]
    return head + "\n".join(rows) + "\n"


def pass_matrix(results: Sequence[SessionResult]) -> str:
    """Task x arm: pass/fail per session as a string of marks (P = pass, F = fail)."""
    arms = list(dict.fromkeys(r.arm for r in results))
    tasks = list(dict.fromkeys(r.task for r in results))
    marks: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for r in results:
        marks.setdefault((r.task, r.arm), []).append((r.session, "P" if r.passed else "F"))
    lines = ["| task | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
    for task in tasks:
        cells = ["".join(m for _, m in sorted(marks.get((task, arm), []))) or "-" for arm in arms]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def reading(results: Sequence[SessionResult]) -> str:
    """One sentence per arm: passes and tokens at the first and the last session."""
    parts = []
    for arm, sessions in summary(results).items():
        first, last = min(sessions), max(sessions)
        a, b = sessions[first], sessions[last]
        parts.append(
            f"{arm}: {int(a['passed'])}/{int(a['tasks'])} passed in session {first}, "
            f"{int(b['passed'])}/{int(b['tasks'])} in session {last} "
            f"({int(a['tokens'])} -> {int(b['tokens'])} tokens, {int(a['agent_requests'])} -> "
            f"{int(b['agent_requests'])} agent requests)"
        )
    return "; ".join(parts) + "."


def totals_table(results: Sequence[SessionResult]) -> str:
    totals = summary(results)
    lines = [
        "| arm | session | passed | tokens | agent requests | cells failed |",
        "|---|---|---|---|---|---|",
    ]
    for arm, sessions in totals.items():
        for session, row in sorted(sessions.items()):
            lines.append(
                f"| {arm} | {session} | {int(row['passed'])}/{int(row['tasks'])} | {int(row['tokens'])} | "
                f"{int(row['agent_requests'])} | {int(row['cells_failed'])} |"
            )
    return "\n".join(lines) + "\n"


def write_run(out: Path, results: Sequence[SessionResult], meta: Mapping[str, Any]) -> dict[str, Any]:
    """results.json, results.md and learning-curve.svg in `out`; returns the results.json object."""
    out.mkdir(parents=True, exist_ok=True)
    regressions = find_regressions(results)
    scripted = bool(meta.get("scripted"))
    label = PIPELINE_LABEL if scripted else f"Model: {meta.get('model')} at {meta.get('endpoint')}"
    document: dict[str, Any] = {
        **meta,
        "label": label,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "processor": platform.processor(),
        },
        "results": [r.to_json() for r in results],
        "summary": {arm: {str(s): row for s, row in rows.items()} for arm, rows in summary(results).items()},
        "regressions": [asdict(r) for r in regressions],
        "analysis": analyse(results),
    }
    (out / "results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    notes = ["pipeline test: scripted model, not model quality"] if scripted else []
    subtitle = "scripted model (pipeline test)" if scripted else f"model {meta.get('model')}"
    (out / "learning-curve.svg").write_text(
        chart(results, title=f"continual-acp eval: {meta.get('run')}", subtitle=subtitle, notes=notes),
        encoding="utf-8",
    )
    md = [
        f"# continual-acp eval: {meta.get('run')}",
        "",
        f"**{label}**",
        "",
        "![learning curve](learning-curve.svg)",
        "",
    ]
    md += [reading(results), ""]
    md += ["## Totals per arm and session", "", totals_table(results)]
    md += ["## Pass (P) or fail (F) per session", "", pass_matrix(results)]
    md += ["## Every session", "", table(results)]
    md += ["## Regressions", ""]
    if regressions:
        md += [
            f"* `{r.task}` ({r.arm}): passed in session {r.session - 1}, failed in session {r.session} after "
            f"refinement(s) {', '.join('`' + i + '`' for i in r.refinement_ids)}; replay without one: "
            f"`continual-acp eval --without {r.refinement_ids[0]} --from {out}`"
            for r in regressions
        ]
    else:
        md.append("None: no task that passed failed after a refinement.")
    md += [
        "",
        "Traces: `traces/<task>/<arm>/session-<k>/` (frames.jsonl, model.jsonl, harness-diff.jsonl, checker.json, transcript.jsonl).",
        "",
    ]
    (out / "results.md").write_text("\n".join(md), encoding="utf-8")
    return document


def load_results(run_dir: Path) -> tuple[dict[str, Any], list[SessionResult]]:
    path = run_dir / "results.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{run_dir}: no results.json (is it an eval run directory?)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from None
    fields = set(SessionResult.__dataclass_fields__)
    rows = [
        SessionResult(**{k: v for k, v in row.items() if k in fields}) for row in document.get("results", [])
    ]
    return document, rows
