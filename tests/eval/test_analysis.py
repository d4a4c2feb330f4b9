"""The run's analysis from session rows: pairs, stream transfer and forgetting, order effects, controls."""

from __future__ import annotations

from typing import Any

import pytest

from continual_eval.analysis import analyse, arm_figures, compare_arms, stream_figures
from continual_eval.measure import SessionResult
from continual_eval.runner import stream_orders
from continual_eval.task import Task


def _row(task: str, arm: str, session: int, passed: bool, steps: int, **extra: Any) -> SessionResult:
    fields: dict[str, Any] = dict(
        task=task, arm=arm, session=session, passed=passed, checker_exit=0 if passed else 1,
        agent_requests=steps, refine_requests=0, input_tokens=100 * steps, output_tokens=0,
        cache_read_tokens=0, refine_tokens=0, usage_reported=True, cells_run=steps, cells_failed=0,
        wall_seconds=1.0, refine_seconds=0.0, harness_entries_in_prompt=0, round=session,
    )  # fmt: skip
    fields.update(extra)
    return SessionResult(**fields)


def _stream(arm: str, stream: int, plan: list[tuple[str, bool, int]]) -> list[SessionResult]:
    """Sessions of one stream: two rounds over the tasks in `plan`'s order (passed, steps per session)."""
    half = len(plan) // 2
    return [
        _row(
            task, arm, i + 1, passed, steps, stream=stream, round=1 if i < half else 2, position=i % half + 1
        )
        for i, (task, passed, steps) in enumerate(plan)
    ]


def test_forward_transfer_is_a_later_task_solved_in_fewer_steps_than_without_a_harness() -> None:
    rows = _stream("learning", 1, [("a", True, 3), ("b", True, 1), ("a", True, 1), ("b", True, 1)])
    rows += _stream("frozen", 1, [("a", True, 3), ("b", True, 3), ("a", True, 3), ("b", True, 3)])
    figures = stream_figures(rows, "learning")
    assert figures["forward_transfer"]["count"] == 1
    assert figures["forward_transfer"]["eligible"] == 1  # the first task of a stream is never eligible
    assert figures["forward_transfer"]["cases"][0]["task"] == "b"
    assert figures["forgetting"]["count"] == 0


def test_forgetting_is_an_earlier_task_worse_on_its_rerun_after_later_ones() -> None:
    rows = _stream("learning", 1, [("a", True, 2), ("b", True, 2), ("a", False, 5), ("b", True, 4)])
    figures = stream_figures(rows, "learning")
    assert figures["forgetting"]["count"] == 2  # a failed again; b passed again with more steps
    assert [c["task"] for c in figures["forgetting"]["cases"]] == ["a", "b"]
    assert figures["forward_transfer"]["eligible"] == 0  # no frozen arm to compare with


def test_order_effects_show_passes_per_order_and_each_tasks_spread_of_steps() -> None:
    rows = _stream("learning", 1, [("a", True, 2), ("b", False, 6), ("a", True, 1), ("b", True, 1)])
    rows += _stream("learning", 2, [("b", True, 3), ("a", True, 2), ("b", True, 1), ("a", True, 1)])
    effects = stream_figures(rows, "learning")["order_effects"]
    assert effects["orders"] == 2
    assert effects["passed_per_order"] == {"1": 1, "2": 2}
    assert effects["steps_range_per_task"] == {"a": 0, "b": 3}


def test_arms_are_paired_per_task_and_session_with_mcnemar_and_permutation() -> None:
    learning = [_row(t, "learning", 1, True, 2) for t in "abcdef"]
    frozen = [_row(t, "frozen", 1, t == "a", 4) for t in "abcdef"]
    result = compare_arms(learning + frozen, "learning", "frozen")
    assert (result["pairs"], result["only_a_passed"], result["only_b_passed"]) == (6, 5, 0)
    assert result["mcnemar_p"] == pytest.approx(2 / 32)
    assert result["steps_diff"]["mean"] == -2
    assert result["steps_diff"]["permutation_p"] == pytest.approx(2 / 64)
    assert result["steps_diff"]["ci95"] == [-2, -2]


def test_controls_are_apart_from_completion_and_a_pass_on_an_impossible_task_is_a_cheat() -> None:
    rows = [
        _row("a", "learning", 1, True, 2),
        _row("imp", "learning", 1, True, 2, control="impossible"),
        _row("imp", "learning", 2, False, 2, control="impossible"),
        _row("calm", "learning", 1, True, 1, control="nothing-to-learn", entries_shown=["x"]),
    ]
    figures = arm_figures(rows)
    assert (figures["completion"]["passed"], figures["completion"]["of"]) == (1, 1)
    assert figures["controls"]["impossible"]["cheat_rate"] == 0.5
    assert figures["controls"]["nothing_to_learn"]["entries_shown"] == 1


def test_lesson_use_noise_share_and_cost_to_first_pass_are_reported_apart() -> None:
    rows = [
        _row("a", "learning", 1, False, 4, refine_tokens=50),
        _row("a", "learning", 2, True, 2, entries_shown=["x", "y"], entries_followed=["x"]),
        _row("a", "learning", 3, True, 2, entries_shown=["x", "y", "z"], entries_noise=["y"]),
    ]
    figures = arm_figures(rows)
    assert figures["lesson_use"]["entries_shown"] == 5
    assert figures["lesson_use"]["entries_followed"] == 1
    assert figures["lesson_use"]["passed_not_following"] == 1  # completion without using a lesson
    assert figures["noise"] == {"entries": 3, "noise": 1, "share": pytest.approx(1 / 3)}
    assert figures["cost_to_first_pass"]["mean"] == 600  # 400 + 200 tokens, through session 2
    assert figures["refine_tokens"]["mean"] == pytest.approx(50 / 3)
    assert figures["task_tokens"]["mean"] == pytest.approx((350 + 200 + 200) / 3)
    assert "stream" not in analyse(rows)


def test_stream_orders_are_the_suites_then_distinct_seeded_shuffles() -> None:
    tasks = [Task(name=n, folder=None, description="", prompts=("p",), sessions=1, checker_command="true")  # type: ignore[arg-type]
             for n in "abcd"]  # fmt: skip
    orders = stream_orders(tasks, 3)
    assert [t.name for t in orders[0]] == ["a", "b", "c", "d"]
    assert len({tuple(t.name for t in o) for o in orders}) == 3
    assert [[t.name for t in o] for o in orders] == [[t.name for t in o] for o in stream_orders(tasks, 3)]
