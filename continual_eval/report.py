"""`continual-acp eval report DIR [DIR...]`: one Markdown comparison of runs, from their results.json."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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
    return "\n".join(lines) + "\n"
