"""Control-plane guard benchmarks: what the per-cell check costs on an unconfined backend.

    .venv/bin/python benchmarks/bench_referee.py [--runs N] [--entries N]

* per-cell overhead with 1,000 entries under `.continual-acp/` and nothing changed: the guard's
  before-cell call (a no-op once it has a baseline) plus its after-cell check (the store lock, then
  by content what inotify names and the top-level files; see bench_control_plane.py for the split)
  -- target <= 3 ms median
* the same check when the cell rewrote one entry file (read, compare, restore, the held record)
* the prompt-start refresh (the whole tree by content, in a thread in the server)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from figures import emit, summary

from agent_core.control_plane.guard import ControlPlaneGuard


def _layout(entries: int) -> Path:
    base = Path(tempfile.mkdtemp(prefix="bench-referee-"))
    root = base / ".continual-acp"
    (root / "gates.toml").parent.mkdir(parents=True)
    (root / "gates.toml").write_text('[[gate]]\ncommand = "pytest -q"\n')
    kinds = ("memory", "prompt", "skill", "subagent")
    for kind in kinds:
        (root / "harness" / "entries" / kind).mkdir(parents=True)
    for index in range(entries - 1):
        kind = kinds[index % len(kinds)]
        body = f'---\nid: "e{index}"\nkind: "{kind}"\n---\n' + "a fact about this repository. " * 10
        (root / "harness" / "entries" / kind / f"e{index}.md").write_text(body)
    return root


def _time(fn: Callable[[], object], runs: int) -> tuple[list[float], list[float]]:
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpu.append((time.process_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
    return wall, cpu


def _line(name: str, wall: list[float], cpu: list[float]) -> str:
    q = statistics.quantiles(wall, n=10)
    return (
        f"{name}: median {statistics.median(wall):.3f} ms wall (p10 {q[0]:.3f}, p90 {q[-1]:.3f}), "
        f"{statistics.median(cpu):.3f} ms cpu"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--entries", type=int, default=1000)
    args = parser.parse_args()
    root = _layout(args.entries)
    files = sum(len(f) for _, _, f in os.walk(root))
    guard = ControlPlaneGuard([root], lock_path=root / "harness" / ".lock")
    guard.refresh()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus, load {os.getloadavg()}")
    print(f"{files} files under {root}")

    def per_cell() -> None:
        guard.ensure_baseline()
        assert guard.check("call", "") is None

    figures: dict[str, dict[str, object]] = {}

    def record(name: str, wall: list[float], cpu: list[float]) -> None:
        print(_line(name, wall, cpu))
        figures[f"{name} (wall)"] = summary(wall, "ms")
        figures[f"{name} (cpu)"] = summary(cpu, "ms")

    wall, cpu = _time(per_cell, args.runs)
    record("per-cell check, nothing changed", wall, cpu)
    target = root / "harness" / "entries" / "memory" / "e0.md"

    def changed() -> None:
        target.write_text("cheat\n")
        assert guard.check("call", "cheat") is not None

    wall, cpu = _time(changed, max(50, args.runs // 5))
    record("check that restores one rewritten entry file", wall, cpu)
    wall, cpu = _time(guard.refresh, args.runs)
    record("prompt-start refresh, nothing moved", wall, cpu)
    guard.close()
    print(f"load after: {os.getloadavg()}")
    emit(figures, settings={"runs": args.runs, "files": files})


if __name__ == "__main__":
    main()
