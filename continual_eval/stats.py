"""The statistics of a run, in pure Python (no numpy or scipy): small, exact where it can be.

* `mcnemar_exact(b, c)`: paired pass/fail of two arms; b = pairs only the first arm passed, c = only
  the second. Two-sided exact binomial test on the discordant pairs (the concordant ones carry no
  information about a difference).
* `paired_permutation(diffs)`: paired differences (steps, tokens); two-sided sign-flip permutation
  test of the mean difference: exact over all 2^n flips up to `exact_limit` pairs, else `rounds`
  seeded random flips.
* `bootstrap_ci(values)`: percentile bootstrap interval of the mean, seeded (the same run gives the
  same interval on every machine).
* `cost_to_first_pass(sessions)`: tokens spent up to and including the first passing session.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

BOOTSTRAP_ROUNDS = 2000
PERMUTATION_ROUNDS = 20000
EXACT_LIMIT = 16
SEED = 20261203


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b and c discordant pairs (1.0 when there are none)."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative; got {b}, {c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / (1 << n))


def paired_permutation(
    diffs: Sequence[float],
    *,
    exact_limit: int = EXACT_LIMIT,
    rounds: int = PERMUTATION_ROUNDS,
    seed: int = SEED,
) -> float:
    """Two-sided p-value of the mean paired difference under random sign flips (1.0 with no pairs)."""
    n = len(diffs)
    if n == 0:
        return 1.0
    observed = abs(sum(diffs))
    tolerance = 1e-9 * max(1.0, observed)
    if n <= exact_limit:
        hits = 0
        for mask in range(1 << n):
            total = sum(-d if mask >> i & 1 else d for i, d in enumerate(diffs))
            hits += abs(total) >= observed - tolerance
        return hits / (1 << n)
    rng = random.Random(seed)
    hits = 0
    for _ in range(rounds):
        total = sum(d if rng.random() < 0.5 else -d for d in diffs)
        hits += abs(total) >= observed - tolerance
    # The observed assignment counts as one of the draws, so p is never 0.
    return (hits + 1) / (rounds + 1)


def bootstrap_ci(
    values: Sequence[float], *, level: float = 0.95, rounds: int = BOOTSTRAP_ROUNDS, seed: int = SEED
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean at `level` (None with no values)."""
    if not values:
        return None
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1; got {level}")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(rounds))
    alpha = (1 - level) / 2
    low = means[math.floor(alpha * rounds)]
    high = means[max(0, math.ceil((1 - alpha) * rounds) - 1)]
    return (low, high)


def cost_to_first_pass(sessions: Sequence[tuple[bool, int]]) -> int | None:
    """Tokens of the (passed, tokens) sessions up to and including the first pass; None if none passed."""
    spent = 0
    for passed, tokens in sessions:
        spent += tokens
        if passed:
            return spent
    return None
