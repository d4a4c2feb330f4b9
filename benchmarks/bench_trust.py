"""Trust benchmarks. Prints medians and the ratio measured in one run.

    .venv/bin/python benchmarks/bench_trust.py [--runs N] [--entries N]

* skill check latency with a warm pool: one check of a good skill with two examples in a scratch
  kernel taken from a pool of one (the pool refills between checks; only the check is timed)
  -- target <= 300 ms median
* apply of a 1-edit proposal to a project store holding 1,000 entries vs the same apply to a global
  store holding the same 1,000 entries, in the same run -- target <= 2x

Ends with the figures line the suite reads (`python -m benchmarks trust`).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from figures import emit, single, summary

from agent_core.trust.skill_check import SkillCheckService
from harness_store import HarnessEntry, HarnessStore
from harness_store.project import ProjectStore

SKILL = "def add(x, y=0):\n    return x + y\n"


def bench_skill_check(runs: int) -> list[float]:
    base = Path(tempfile.mkdtemp(prefix="bench-trust-"))
    (base / "benchskill.py").write_text(SKILL, encoding="utf-8")
    entry = HarnessEntry(
        id="add",
        kind="skill",
        title="add",
        content="adds",
        reference={"type": "python", "import": "benchskill", "callable": "add"},
        arguments={"x": {}, "y": {}},
        examples=[{"args": [1, 2], "expect": 3}, {"kwargs": {"x": 4}, "predicate": "result == 4"}],
        created_at="t",
        updated_at="t",
    )
    service = SkillCheckService(pool_size=1)
    service.warm()
    times: list[float] = []
    try:
        for _ in range(runs + 1):  # the first is discarded as warm-up
            deadline = time.monotonic() + 120
            while service.ready_count() < 1 and time.monotonic() < deadline:
                time.sleep(0.05)  # benchmark only: wait (untimed) until the pool refilled
            started = time.perf_counter()
            check = service.check(entry, cwd=base)
            times.append(time.perf_counter() - started)
            assert check.ok, check.output
    finally:
        service.close()
    return times[1:]


def _memory(i: int) -> dict[str, object]:
    return {
        "action": "create",
        "kind": "memory",
        "id": f"m{i:05d}",
        "title": f"Memory {i}",
        "content": f"fact {i} " * 8,
    }


def bench_apply(entries: int, runs: int) -> tuple[list[float], list[float]]:
    base = Path(tempfile.mkdtemp(prefix="bench-trust-apply-"))
    project = ProjectStore(base / "repo")
    glob = HarnessStore(base / "home" / "harness")
    seed = {"summary": "seed", "edits": [_memory(i) for i in range(entries)]}
    project.apply(seed, trigger="user")
    glob.apply(seed, scope="global", trigger="user")
    project_times: list[float] = []
    global_times: list[float] = []
    for run in range(runs + 1):
        edit = {"edits": [{**_memory(run % entries), "action": "update", "content": f"changed {run}"}]}
        started = time.perf_counter()
        glob.apply(edit, scope="global", trigger="user")
        global_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        project.apply(edit, trigger="user")
        project_times.append(time.perf_counter() - started)
    return project_times[1:], global_times[1:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--entries", type=int, default=1000)
    args = parser.parse_args()
    print(f"# bench_trust on {platform.node()} ({os.cpu_count()} cpus), load {os.getloadavg()[0]:.1f}")
    checks = bench_skill_check(args.runs)
    print(
        f"skill check, warm pool: median {statistics.median(checks) * 1000:.0f} ms, "
        f"min {min(checks) * 1000:.0f} ms, max {max(checks) * 1000:.0f} ms (n={len(checks)})"
    )
    project, glob = bench_apply(args.entries, args.runs * 3)
    p, g = statistics.median(project), statistics.median(glob)
    print(
        f"apply, {args.entries} entries: project median {p * 1000:.1f} ms, global median {g * 1000:.1f} ms, "
        f"ratio {p / g:.2f}x (n={len(project)})"
    )
    print(f"load after: {os.getloadavg()[0]:.1f}")
    n = f"{args.entries:,}"
    figures = {
        "skill check, warm pool of one": summary([t * 1000 for t in checks], "ms"),
        f"apply, project store, {n} entries": summary([t * 1000 for t in project], "ms"),
        f"apply, global store, {n} entries": summary([t * 1000 for t in glob], "ms"),
        "ratio project / global": single(round(p / g, 3), "x"),
    }
    emit(figures, settings={"runs": args.runs, "entries": args.entries})


if __name__ == "__main__":
    main()
