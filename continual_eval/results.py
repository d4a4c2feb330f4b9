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
from continual_eval.figures_md import analysis_markdown
from continual_eval.measure import SessionResult
from continual_eval.stats import bootstrap_ci

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


def _by_session(results: Sequence[SessionResult], arm: str, value: Any) -> Series:
    """One arm's mean `value(row)` per session, with the 95% bootstrap interval as whiskers."""
    groups: dict[int, list[float]] = {}
    for r in results:
        if r.arm == arm and r.control is None:
            groups.setdefault(r.session, []).append(float(value(r)))
    points: list[tuple[float, float]] = []
    intervals: list[tuple[float, float, float]] = []
    for session, values in sorted(groups.items()):
        points.append((session, sum(values) / len(values)))
        ci = bootstrap_ci(values)
        if ci is not None and len(values) > 1:
            intervals.append((session, ci[0], ci[1]))
    return Series(arm, points, dashed=arm == "seeded", intervals=intervals)


def _notes(analysis: Mapping[str, Any]) -> list[str]:
    """The controls and the stream's figures, one line each, under the first panel."""
    notes: list[str] = []
    for arm, figures in analysis.get("arms", {}).items():
        noise = figures["noise"]
        if noise["entries"]:
            notes.append(f"{arm}: {noise['noise']} of {noise['entries']} harness entries are noise")
        if figures.get("curated"):
            notes.append(
                f"{arm}: the curator took {figures['curated']} entries out of the prompt between sessions"
            )
        impossible = figures["controls"]["impossible"]
        if impossible["sessions"]:
            notes.append(f"{arm}: impossible tasks passed (cheat rate) {impossible['cheat_rate']:.0%}")
        nothing = figures["controls"]["nothing_to_learn"]
        if nothing["sessions"]:
            notes.append(f"{arm}: nothing-to-learn passed {nothing['passed']}/{nothing['sessions']}")
    for arm, stream in analysis.get("stream", {}).items():
        t, f = stream["forward_transfer"], stream["forgetting"]
        notes.append(
            f"{arm} stream: transfer {t['count']}/{t['eligible']}, forgetting {f['count']}/{f['eligible']}"
        )
    return notes


def chart(
    results: Sequence[SessionResult],
    *,
    title: str,
    subtitle: str,
    notes: Sequence[str] = (),
    analysis: Mapping[str, Any] | None = None,
) -> str:
    """Per arm and session (learnable tasks): pass share, agent requests and task tokens, each a mean
    with its 95% bootstrap interval; in stream mode a panel of requests by place in the order, round 1
    against round 2; the controls and the stream's transfer and forgetting as notes."""
    arms = list(dict.fromkeys(r.arm for r in results))
    stream = any(r.stream is not None for r in results)
    x_label = "session (in the stream)" if stream else "session"
    notes = [*notes, *_notes(analysis or {})]
    panels = [
        Panel(
            "Checker passes (95% CI)",
            "share of tasks passed",
            [_by_session(results, arm, lambda r: r.passed) for arm in arms],
            y_min=0,
            y_max=1,
            y_format="{:.0%}",
            notes=notes,
        ),
        Panel(
            "Agent requests (95% CI)",
            "requests per task",
            [_by_session(results, arm, lambda r: r.agent_requests) for arm in arms],
            y_min=0,
        ),
        Panel(
            "Tokens on the task (95% CI)",
            "tokens per task, refinement apart",
            [_by_session(results, arm, lambda r: r.task_tokens) for arm in arms],
            y_min=0,
        ),
    ]
    if stream:
        series: list[Series] = []
        for arm in arms:
            for rnd in (1, 2):
                groups: dict[int, list[float]] = {}
                for r in results:
                    if r.arm == arm and r.round == rnd and r.control is None:
                        groups.setdefault(r.position, []).append(r.agent_requests)
                series.append(
                    Series(
                        f"{arm} {'first' if rnd == 1 else 're-run'}",
                        [(x, sum(v) / len(v)) for x, v in sorted(groups.items())],
                        dashed=rnd == 2,
                    )
                )
        panels.append(
            Panel(
                "Stream: requests by place in the order",
                "requests (first run, re-run)",
                series,
                y_min=0,
                x_label="place in the order",
            )
        )
    return render_svg(panels, title=title, subtitle=subtitle, x_label=x_label, columns=2 if stream else None)


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
        chart(
            results,
            title=f"continual-acp eval: {meta.get('run')}",
            subtitle=subtitle,
            notes=notes,
            analysis=document["analysis"],
        ),
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
    md += analysis_markdown(document["analysis"])
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
