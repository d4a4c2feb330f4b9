"""The analysis (continual_eval.analysis) as Markdown tables: results.md and `eval report` share them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _num(value: float | None, digits: int = 1) -> str:
    return (
        "-" if value is None else f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:.0f}"
    )


def _ci(figure: Mapping[str, Any], digits: int = 1) -> str:
    """`mean [low, high]` (the 95% bootstrap interval), or `-`."""
    if figure.get("mean") is None:
        return "-"
    ci = figure.get("ci95")
    inside = f" [{_num(ci[0], digits)}, {_num(ci[1], digits)}]" if ci else ""
    return _num(figure["mean"], digits) + inside


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def arms_table(analysis: Mapping[str, Any], label: str = "") -> list[str]:
    """One row per arm: completion, steps, tokens apart, cost to first pass, lesson use, noise, controls."""
    head = "| run | arm |" if label else "| arm |"
    lines = [
        head + " passed (share [95% CI]) | agent requests | task tokens | refinement tokens | cost to first "
        "pass (tokens) | entries followed / shown | noise in harness | impossible: cheat rate | "
        "nothing-to-learn passed |",
        "|---" * (11 if label else 10) + "|",
    ]
    for arm, f in analysis.get("arms", {}).items():
        c = f["completion"]
        cost = f["cost_to_first_pass"]
        use = f["lesson_use"]
        noise = f["noise"]
        imp = f["controls"]["impossible"]
        calm = f["controls"]["nothing_to_learn"]
        prefix = f"| {label} | {arm} |" if label else f"| {arm} |"
        lines.append(
            f"{prefix} {c['passed']}/{c['of']} ({_ci(c, 2)}) | {_ci(f['steps'], 2)} | {_ci(f['task_tokens'], 0)} | "
            f"{_ci(f['refine_tokens'], 0)} | {_num(cost['mean'], 0)} ({cost['passed_units']}/{cost['units']} "
            f"passed) | {use['entries_followed']}/{use['entries_shown']} ({_share(use['followed_share'])}) | "
            f"{noise['noise']}/{noise['entries']} ({_share(noise['share'])}) | "
            f"{_share(imp['cheat_rate']) if imp['sessions'] else '-'} | "
            f"{str(calm['passed']) + '/' + str(calm['sessions']) if calm['sessions'] else '-'} |"
        )
    return lines


def comparisons_table(comparisons: Sequence[Mapping[str, Any]]) -> list[str]:
    """Arm against arm, paired: discordant passes and McNemar, steps and tokens with interval and p."""
    lines = [
        "| a vs b | pairs | only a passed | only b passed | McNemar p | requests a - b [95% CI] | "
        "permutation p | task tokens a - b [95% CI] | permutation p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        lines.append(
            f"| {c['a']} vs {c['b']} | {c['pairs']} | {c['only_a_passed']} | {c['only_b_passed']} | "
            f"{c['mcnemar_p']:.3g} | {_ci(c['steps_diff'], 2)} | {c['steps_diff']['permutation_p']:.3g} | "
            f"{_ci(c['task_tokens_diff'], 0)} | {c['task_tokens_diff']['permutation_p']:.3g} |"
        )
    return lines


def stream_table(analysis: Mapping[str, Any], label: str = "") -> list[str]:
    """Per arm: forward transfer, forgetting, passes per order and the widest spread of a task's steps."""
    head = "| run | arm |" if label else "| arm |"
    lines = [
        head
        + " forward transfer | forgetting | passes per order | task with the widest spread of requests |",
        "|---" * (6 if label else 5) + "|",
    ]
    for arm, s in analysis.get("stream", {}).items():
        t, f, o = s["forward_transfer"], s["forgetting"], s["order_effects"]
        passes = " ".join(
            f"{o['passed_per_order'][k]}/{o['tasks_per_order'][k]}" for k in o["passed_per_order"]
        )
        spread = o["steps_range_per_task"]
        widest = max(spread, key=lambda task: spread[task]) if spread else None
        prefix = f"| {label} | {arm} |" if label else f"| {arm} |"
        lines.append(
            f"{prefix} {t['count']}/{t['eligible']} | {f['count']}/{f['eligible']} | {passes or '-'} | "
            + (f"{widest} ({spread[widest]} requests) |" if widest else "- |")
        )
    return lines


def analysis_markdown(analysis: Mapping[str, Any]) -> list[str]:
    """The sections of results.md that the analysis fills."""
    md = ["## Arms: completion, cost, lesson use, noise, controls", "", *arms_table(analysis), ""]
    if analysis.get("comparisons"):
        md += ["## Arm against arm (paired per task, seed, stream and round)", ""]
        md += [*comparisons_table(analysis["comparisons"]), ""]
    if analysis.get("stream"):
        md += ["## Stream: forward transfer, forgetting, order effects", "", *stream_table(analysis), ""]
    return md
