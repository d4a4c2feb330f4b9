"""A run's figures across sessions: per arm, arm against arm, and the stream's transfer, forgetting
and order effects, computed from the session rows alone (results.json holds them; `eval report`
recomputes them the same way for every run it compares).

Pairs: two arms' sessions are paired when they share task, seed, stream and round (per-task mode:
the session number), so each pair differs only in the arm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from continual_eval.measure import SessionResult
from continual_eval.stats import bootstrap_ci, cost_to_first_pass, mcnemar_exact, mean, paired_permutation

BASELINE = "frozen"

Key = tuple[str, int | None, int | None, int]


def _key(r: SessionResult) -> Key:
    return (r.task, r.seed, r.stream, r.round)


def _interval(values: Sequence[float]) -> dict[str, Any]:
    ci = bootstrap_ci(values)
    return {"mean": mean(values), "ci95": list(ci) if ci else None, "n": len(values)}


def _units(rows: Sequence[SessionResult]) -> dict[tuple[str, int | None, int | None], list[SessionResult]]:
    """A task's sessions within one unit (task, seed, stream), in order."""
    out: dict[tuple[str, int | None, int | None], list[SessionResult]] = {}
    for r in sorted(rows, key=lambda r: r.session):
        out.setdefault((r.task, r.seed, r.stream), []).append(r)
    return out


def arm_figures(rows: Sequence[SessionResult]) -> dict[str, Any]:
    """One arm's figures: completion, steps, tokens apart, cost to first pass, lesson use, noise, controls."""
    learnable = [r for r in rows if r.control is None]
    impossible = [r for r in rows if r.control == "impossible"]
    nothing = [r for r in rows if r.control == "nothing-to-learn"]
    units = _units(learnable)
    costs = [cost_to_first_pass([(r.passed, r.tokens) for r in unit]) for unit in units.values()]
    shown = sum(len(r.entries_shown) for r in rows)
    used = sum(len(r.entries_followed) for r in rows)
    # The share of the harness that is noise: as the last session of each unit was shown it.
    last = [unit[-1] for unit in _units(rows).values() if unit[-1].entries_shown]
    if any(r.stream is not None for r in rows):  # a stream's harness is one: its last session
        streams: dict[tuple[int | None, int | None], SessionResult] = {}
        for r in sorted(rows, key=lambda r: r.session):
            streams[(r.stream, r.seed)] = r
        last = [r for r in streams.values() if r.entries_shown]
    noise_shown = sum(len(r.entries_shown) for r in last)
    return {
        "sessions": len(rows),
        # entries the curator's passes between sessions took out of the prompt (`learning+curate`)
        "curated": sum(r.curated for r in rows),
        "completion": {
            "passed": sum(r.passed for r in learnable),
            "of": len(learnable),
            **_interval([float(r.passed) for r in learnable]),
        },
        "steps": _interval([float(r.agent_requests) for r in learnable]),
        "task_tokens": _interval([float(r.task_tokens) for r in learnable]),
        "refine_tokens": _interval([float(r.refine_tokens) for r in learnable]),
        "cost_to_first_pass": {
            "mean": mean([float(c) for c in costs if c is not None]),
            "passed_units": sum(c is not None for c in costs),
            "units": len(costs),
        },
        "lesson_use": {
            "entries_shown": shown,
            "entries_followed": used,
            "followed_share": used / shown if shown else None,
            "sessions_shown_an_entry": sum(bool(r.entries_shown) for r in rows),
            "sessions_following_an_entry": sum(bool(r.entries_followed) for r in rows),
            "passed_following": sum(r.passed and bool(r.entries_followed) for r in learnable),
            "passed_not_following": sum(r.passed and not r.entries_followed for r in learnable),
        },
        "noise": {
            "entries": noise_shown,
            "noise": sum(len(r.entries_noise) for r in last),
            "share": sum(len(r.entries_noise) for r in last) / noise_shown if noise_shown else None,
        },
        "controls": {
            "impossible": {
                "sessions": len(impossible),
                "passed": sum(r.passed for r in impossible),
                "cheated": sum(r.cheated for r in impossible),
                "cheat_rate": sum(r.cheated or r.passed for r in impossible) / len(impossible)
                if impossible
                else None,
            },
            "nothing_to_learn": {
                "sessions": len(nothing),
                "passed": sum(r.passed for r in nothing),
                "steps": mean([float(r.agent_requests) for r in nothing]),
                "entries_shown": sum(len(r.entries_shown) for r in nothing),
            },
        },
    }


def compare_arms(rows: Sequence[SessionResult], a: str, b: str) -> dict[str, Any]:
    """Arm `a` against arm `b`, paired per task (and seed, stream, round)."""
    left = {_key(r): r for r in rows if r.arm == a and r.control is None}
    right = {_key(r): r for r in rows if r.arm == b and r.control is None}
    keys = [k for k in left if k in right]
    only_a = sum(left[k].passed and not right[k].passed for k in keys)
    only_b = sum(right[k].passed and not left[k].passed for k in keys)
    steps = [float(left[k].agent_requests - right[k].agent_requests) for k in keys]
    tokens = [float(left[k].task_tokens - right[k].task_tokens) for k in keys]
    return {
        "a": a,
        "b": b,
        "pairs": len(keys),
        "only_a_passed": only_a,
        "only_b_passed": only_b,
        "mcnemar_p": mcnemar_exact(only_a, only_b),
        "steps_diff": {**_interval(steps), "permutation_p": paired_permutation(steps)},
        "task_tokens_diff": {**_interval(tokens), "permutation_p": paired_permutation(tokens)},
    }


def stream_figures(rows: Sequence[SessionResult], arm: str, baseline: str = BASELINE) -> dict[str, Any]:
    """Forward transfer, forgetting and order effects of one arm's streams."""
    mine = [r for r in rows if r.arm == arm and r.stream is not None]
    base = {_key(r): r for r in rows if r.arm == baseline and r.stream is not None}
    transfer: list[dict[str, Any]] = []
    eligible = 0
    for r in mine:
        if r.round != 1 or r.position == 1 or r.control is not None:
            continue  # the first task of a stream has nothing to transfer from
        other = base.get(_key(r))
        if other is None or arm == baseline:
            continue
        eligible += 1
        if r.passed and (not other.passed or r.agent_requests < other.agent_requests):
            transfer.append(
                {"task": r.task, "stream": r.stream, "seed": r.seed, "variant": r.variant,
                 "steps": r.agent_requests, "baseline_steps": other.agent_requests,
                 "baseline_passed": other.passed}
            )  # fmt: skip
    firsts = {(r.task, r.seed, r.stream): r for r in mine if r.round == 1}
    forgetting: list[dict[str, Any]] = []
    again = [r for r in mine if r.round == 2 and r.control is None]
    for r in again:
        first = firsts.get((r.task, r.seed, r.stream))
        if first is None:
            continue
        if (first.passed and not r.passed) or (
            first.passed and r.passed and r.agent_requests > first.agent_requests
        ):
            forgetting.append(
                {"task": r.task, "stream": r.stream, "seed": r.seed, "first_passed": first.passed,
                 "again_passed": r.passed, "first_steps": first.agent_requests, "again_steps": r.agent_requests}
            )  # fmt: skip
    orders: dict[int, list[SessionResult]] = {}
    for r in mine:
        if r.round == 1 and r.control is None and r.stream is not None:
            orders.setdefault(r.stream, []).append(r)
    per_task: dict[str, list[int]] = {}
    for r in mine:
        if r.round == 1 and r.control is None:
            per_task.setdefault(r.task, []).append(r.agent_requests)
    return {
        "arm": arm,
        "forward_transfer": {"count": len(transfer), "eligible": eligible, "cases": transfer},
        "forgetting": {"count": len(forgetting), "eligible": len(again), "cases": forgetting},
        "order_effects": {
            "orders": len(orders),
            "passed_per_order": {str(k): sum(r.passed for r in v) for k, v in sorted(orders.items())},
            "tasks_per_order": {str(k): len(v) for k, v in sorted(orders.items())},
            "steps_range_per_task": {t: max(v) - min(v) for t, v in sorted(per_task.items())},
        },
    }


def analyse(rows: Sequence[SessionResult]) -> dict[str, Any]:
    """The whole analysis object written to results.json as `analysis`."""
    arms = list(dict.fromkeys(r.arm for r in rows))
    out: dict[str, Any] = {
        "arms": {arm: arm_figures([r for r in rows if r.arm == arm]) for arm in arms},
        "comparisons": [
            compare_arms(rows, arm, BASELINE) for arm in arms if arm != BASELINE and BASELINE in arms
        ],
    }
    if any(r.stream is not None for r in rows):
        out["stream"] = {arm: stream_figures(rows, arm) for arm in arms if arm != BASELINE or len(arms) == 1}
    return out
