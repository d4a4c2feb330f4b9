"""Regressions and the summary tables, from session rows."""

from __future__ import annotations

from continual_eval.measure import SessionResult
from continual_eval.results import Regression, find_regressions, pass_matrix, reading


def _row(session: int, passed: bool, applied: tuple[str, ...] = (), arm: str = "learning") -> SessionResult:
    return SessionResult(
        task="t", arm=arm, session=session, passed=passed, checker_exit=0 if passed else 1,
        agent_requests=3, refine_requests=0, input_tokens=100, output_tokens=10, cache_read_tokens=0,
        refine_tokens=0, usage_reported=True, cells_run=2, cells_failed=0, wall_seconds=1.0,
        refine_seconds=0.0, harness_entries_in_prompt=0, refinements_applied=list(applied),
    )  # fmt: skip


def test_a_pass_then_a_fail_after_a_refinement_is_a_regression_naming_it() -> None:
    rows = [_row(1, True, ("r-1",)), _row(2, False, ("r-2",)), _row(3, False)]
    assert find_regressions(rows) == [Regression("t", "learning", 2, ("r-1",))]


def test_a_fail_with_no_refinement_before_it_is_not_blamed_on_one() -> None:
    assert find_regressions([_row(1, True), _row(2, False)]) == []
    assert find_regressions([_row(1, False, ("r-1",)), _row(2, False)]) == []
    assert find_regressions([_row(1, True, ("r-1",)), _row(2, True)]) == []


def test_sessions_are_ordered_before_comparing() -> None:
    rows = [_row(2, False), _row(1, True, ("r-1",))]
    assert find_regressions(rows) == [Regression("t", "learning", 2, ("r-1",))]


def test_pass_matrix_and_reading_summarise_each_arm() -> None:
    rows = [_row(1, False), _row(2, True), _row(1, False, arm="frozen"), _row(2, False, arm="frozen")]
    assert "| t | FP | FF |" in pass_matrix(rows)
    assert reading(rows).startswith("learning: 0/1 passed in session 1, 1/1 in session 2")
