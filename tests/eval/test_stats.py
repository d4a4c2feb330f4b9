"""continual_eval.stats against answers computed by hand."""

from __future__ import annotations

import pytest

from continual_eval.stats import (
    bootstrap_ci,
    cost_to_first_pass,
    mcnemar_exact,
    mean,
    paired_permutation,
)


def test_mcnemar_exact_matches_the_binomial_tail_computed_by_hand() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)  # 2 * C(5,0) / 2^5
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    assert mcnemar_exact(1, 4) == pytest.approx(2 * (1 + 5) / 32)
    assert mcnemar_exact(3, 3) == 1.0  # 2 * 42 / 64 capped at 1
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 1024)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_paired_permutation_counts_sign_flips_exactly_for_small_samples() -> None:
    assert paired_permutation([]) == 1.0
    assert paired_permutation([1, 2, 3]) == pytest.approx(2 / 8)  # only all-plus and all-minus reach 6
    assert paired_permutation([2, 2, 2, 2]) == pytest.approx(2 / 16)
    assert paired_permutation([1, -1]) == 1.0
    assert paired_permutation([0, 0]) == 1.0
    assert paired_permutation([3, 1]) == pytest.approx(2 / 4)  # |±3±1| >= 4 for (+,+) and (-,-)


def test_paired_permutation_samples_above_the_exact_limit_and_is_seeded() -> None:
    diffs = [1.0] * 20  # exact p is 2 / 2^20; sampled, the observed draw bounds it below
    p = paired_permutation(diffs, rounds=2000)
    assert p == pytest.approx(1 / 2001)
    assert paired_permutation([1, -1] * 10, rounds=500) == paired_permutation([1, -1] * 10, rounds=500)


def test_bootstrap_interval_of_two_values_spans_both_and_of_a_constant_is_a_point() -> None:
    # Means of a resample of [0, 10]: 0 (p=1/4), 5 (1/2), 10 (1/4): the 2.5% and 97.5% points are 0 and 10.
    assert bootstrap_ci([0, 10]) == (0, 10)
    assert bootstrap_ci([4, 4, 4]) == (4, 4)
    assert bootstrap_ci([7]) == (7, 7)
    assert bootstrap_ci([]) is None
    low, high = bootstrap_ci([1, 2, 3, 4, 5, 6, 7, 8]) or (0, 0)
    assert low < 4.5 < high
    assert bootstrap_ci([1, 2, 3]) == bootstrap_ci([1, 2, 3])  # seeded


def test_cost_to_first_pass_sums_tokens_through_the_first_pass_only() -> None:
    assert cost_to_first_pass([(False, 100), (False, 50), (True, 20), (True, 999)]) == 170
    assert cost_to_first_pass([(True, 30)]) == 30
    assert cost_to_first_pass([(False, 30), (False, 5)]) is None
    assert mean([]) is None and mean([1, 2]) == 1.5
