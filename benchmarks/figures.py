"""How a benchmark hands its figures to the suite (`python -m benchmarks`).

A benchmark run by the suite prints, as its last stdout line, `BENCH-FIGURES <json>`: a mapping of
figure name to `summary(...)` (median, spread, n, unit) plus optional "compared" text. Run alone it
prints the same line after its own table, so nothing else about a benchmark changes.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from typing import Any

MARKER = "BENCH-FIGURES "


def summary(values: Sequence[float], unit: str) -> dict[str, Any]:
    """Median, p10/p90 (min/max below 10 samples), min, max and n of one figure's samples."""
    ordered = sorted(values)
    if len(ordered) >= 10:
        deciles = statistics.quantiles(ordered, n=10)
        low, high = deciles[0], deciles[-1]
    else:
        low, high = ordered[0], ordered[-1]
    return {
        "median": round(statistics.median(ordered), 4),
        "p10": round(low, 4),
        "p90": round(high, 4),
        "min": round(ordered[0], 4),
        "max": round(ordered[-1], 4),
        "n": len(ordered),
        "unit": unit,
    }


def single(value: float, unit: str) -> dict[str, Any]:
    """A figure measured once (a count, a size): n = 1, no spread."""
    value = round(value, 4)
    return {
        "median": value,
        "p10": value,
        "p90": value,
        "min": value,
        "max": value,
        "n": 1,
        "unit": unit,
    }


def median_only(value: float, unit: str, n: int | None) -> dict[str, Any]:
    """A figure a benchmark reports as a median of `n` samples (None: not known here) without the
    samples themselves."""
    return {"median": round(value, 4), "n": n, "unit": unit}


def from_spread(spread: dict[str, float], unit: str = "ms") -> dict[str, Any]:
    """A `{median_ms, p10_ms, p90_ms, n}` dict some benchmarks build themselves."""
    return {
        "median": round(spread["median_ms"], 4),
        "p10": round(spread["p10_ms"], 4),
        "p90": round(spread["p90_ms"], 4),
        "n": int(spread["n"]),
        "unit": unit,
    }


def emit(figures: dict[str, dict[str, Any]], **extra: Any) -> None:
    """Print the figures line the suite reads (`extra`: e.g. `ratio` notes, settings of the run)."""
    sys.stdout.write(MARKER + json.dumps({"figures": figures, **extra}) + "\n")
    sys.stdout.flush()


def parse(stdout: str) -> dict[str, Any] | None:
    """The last figures line of a benchmark's stdout, or None when it printed none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            parsed: dict[str, Any] = json.loads(line[len(MARKER) :])
            return parsed
    return None
