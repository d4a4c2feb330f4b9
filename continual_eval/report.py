"""`continual-acp eval report DIR [DIR...]`: one Markdown comparison of runs, from their results.json."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from continual_eval.analysis import analyse, compare_arms
from continual_eval.figures_md import arms_table, comparisons_table, stream_table
from continual_eval.measure import SessionResult
from continual_eval.results import load_results, summary


def compare_runs(run_dirs: Sequence[Path]) -> str:
    """Per run and arm: passes per session, total tokens and agent requests, failed cells, regressions;
    then per task, each run and arm's pass (P) / fail (F) per session."""
    lines = [
        "| run | label | arm | passes per session | tokens | agent requests | cells failed | regressions |",
        "|---|---|---|---|---|---|---|---|",
    ]
    columns: list[tuple[int, str]] = []  # (run position, arm): a run given twice is two columns
    labels: dict[tuple[int, str], str] = {}
    marks: dict[tuple[str, tuple[int, str]], str] = {}
    for position, run_dir in enumerate(run_dirs):
        document, results = load_results(run_dir)
        run = str(document.get("run", run_dir.name))
        for r in results:  # task, arm, session order, as the run wrote them
            column = (position, r.arm)
            if column not in columns:
                columns.append(column)
                labels[column] = f"{run} {r.arm}"
            marks[(r.task, column)] = marks.get((r.task, column), "") + ("P" if r.passed else "F")
        label = "pipeline test (scripted)" if document.get("scripted") else str(document.get("model"))
        regressions = document.get("regressions") or []
        for arm, sessions in summary(results).items():
            ordered = [sessions[s] for s in sorted(sessions)]
            passes = " ".join(f"{int(r['passed'])}/{int(r['tasks'])}" for r in ordered)
            tokens = int(sum(r["tokens"] for r in ordered))
            requests = int(sum(r["agent_requests"] for r in ordered))
            failed = int(sum(r["cells_failed"] for r in ordered))
            flagged = sum(1 for r in regressions if r.get("arm") == arm)
            lines.append(
                f"| {document.get('run', run_dir.name)} | {label} | {arm} | {passes} | {tokens} | {requests} | "
                f"{failed} | {flagged} |"
            )
    tasks = sorted({task for task, _ in marks})
    lines += [
        "",
        "| task | " + " | ".join(labels[c] for c in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    lines += [
        f"| {task} | " + " | ".join(marks.get((task, c), "-") for c in columns) + " |" for task in tasks
    ]
    return "\n".join(lines) + "\n" + statistics(run_dirs)


def statistics(run_dirs: Sequence[Path]) -> str:
    """The same statistics as each run's results.md, recomputed from its rows, then each arm of every
    later run against the same arm of the first, paired per task, seed, stream and round."""
    runs: list[tuple[str, list[SessionResult]]] = []
    for position, run_dir in enumerate(run_dirs):
        document, rows = load_results(run_dir)
        name = str(document.get("run", run_dir.name))
        runs.append((name if all(name != n for n, _ in runs) else f"{name}#{position + 1}", rows))
    arms: list[str] = []
    streams: list[str] = []
    inside: list[dict[str, Any]] = []
    for name, rows in runs:
        analysis = analyse(rows)
        arms += arms_table(analysis, label=name)[len(arms) and 2 :]
        streams += stream_table(analysis, label=name)[len(streams) and 2 :]
        inside += [{**c, "a": f"{name} {c['a']}", "b": f"{name} {c['b']}"} for c in analysis["comparisons"]]
    across: list[dict[str, Any]] = []
    first, base = runs[0]
    for name, rows in runs[1:]:
        for arm in dict.fromkeys(r.arm for r in base):
            if any(r.arm == arm for r in rows):
                both = [replace(r, arm=f"{first} {arm}") for r in base if r.arm == arm]
                both += [replace(r, arm=f"{name} {arm}") for r in rows if r.arm == arm]
                across.append(compare_arms(both, f"{name} {arm}", f"{first} {arm}"))
    out = ["", "## Statistics per run and arm", "", *arms]
    if inside or across:
        out += ["", "## Paired comparisons (within each run, then each run against the first)", ""]
        out += comparisons_table(inside + across)
    if any(line.count("|") > 2 for line in streams[2:]):
        out += ["", "## Streams", "", *streams]
    return "\n".join(out) + "\n"
