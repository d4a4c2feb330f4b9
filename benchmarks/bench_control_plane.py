"""The control-plane guard by content: what each check costs with 1,000 files under `.continual-acp/`.

    .venv/bin/python benchmarks/bench_control_plane.py [--runs N] [--entries N] [--out PATH]

* per-cell check, nothing changed (the quick path the turn loop takes on the event loop: inotify's
  queue, the top-level files by content) -- target <= 3 ms median for 1,000 files
* per-cell check after an entry rewritten in place with its mtime set back (found, restored, held)
* the whole tree by content: the prompt's start and end, and every check where inotify cannot be
  trusted (no inotify, a file system that is not local, a new directory)
* for reference: one `scandir` stat walk of the tree, and reading every file

Prints medians with p10/p90 and writes them as JSON to `--out` (default: beside this script).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from figures import emit, summary

from agent_core.control_plane.guard import ControlPlaneGuard
from agent_core.control_plane.scan import scan

KINDS = ("memory", "prompt", "skill", "subagent")


def _layout(entries: int) -> Path:
    root = Path(tempfile.mkdtemp(prefix="bench-control-plane-")) / ".continual-acp"
    for kind in KINDS:
        (root / "harness" / "entries" / kind).mkdir(parents=True)
    (root / "gates.toml").write_text('[[gate]]\ncommand = "pytest -q"\n')
    for index in range(entries - 1):
        kind = KINDS[index % len(KINDS)]
        body = f'---\nid: "e{index}"\nkind: "{kind}"\n---\n' + "a fact about this repository. " * 10
        (root / "harness" / "entries" / kind / f"e{index}.md").write_text(body)
    return root


def _time(fn: Callable[[], object], runs: int) -> dict[str, Any]:
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpu.append((time.process_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
    q = statistics.quantiles(wall, n=10)
    return {
        "runs": runs,
        "median_ms": statistics.median(wall),
        "p10_ms": q[0],
        "p90_ms": q[-1],
        "cpu_median_ms": statistics.median(cpu),
        "_wall": wall,
        "_cpu": cpu,
    }


def _rewrite_in_place(path: Path, data: bytes) -> None:
    before = path.stat()
    with path.open("r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--out", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    root = _layout(args.entries)
    files = sum(len(f) for _, _, f in os.walk(root))
    guard = ControlPlaneGuard([root], lock_path=root / "harness" / ".lock")
    guard.ensure_baseline()
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus"
    load_before = os.getloadavg()
    results: dict[str, Any] = {"machine": machine, "files": files, "load_before": load_before}

    def quick() -> None:
        assert guard.check("call", "", wait=False) is None

    results["per_cell_check_nothing_changed"] = _time(quick, args.runs)

    target = root / "harness" / "entries" / "memory" / "e0.md"
    original = target.read_bytes()
    forged = original.replace(b"a fact", b"A FACT", 1)

    def changed() -> None:
        _rewrite_in_place(target, forged)
        held = guard.check("call", "cheat", wait=False)
        assert held is not None and held.files[0].after == forged

    results["per_cell_check_restores_a_stat_kept_rewrite"] = _time(changed, max(50, args.runs // 5))
    guard.check("call", "")  # the restore's own events, compared once

    def whole() -> None:
        assert guard.check("", "", full=True) is None

    results["whole_tree_by_content"] = _time(whole, max(50, args.runs // 5))

    def walk() -> None:
        scan(root)

    results["reference_stat_walk"] = _time(walk, args.runs)
    paths = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]

    def read_all() -> None:
        for path in paths:
            with open(path, "rb") as fh:
                fh.read()

    results["reference_read_every_file"] = _time(read_all, max(50, args.runs // 5))
    guard.close()
    results["load_after"] = os.getloadavg()

    print(f"{machine}, load {load_before}; {files} files under {root}")
    for name, numbers in results.items():
        if isinstance(numbers, dict):
            print(
                f"{name}: median {numbers['median_ms']:.3f} ms wall (p10 {numbers['p10_ms']:.3f}, "
                f"p90 {numbers['p90_ms']:.3f}), {numbers['cpu_median_ms']:.3f} ms cpu, {numbers['runs']} runs"
            )
    print(f"load after: {results['load_after']}")
    figures: dict[str, dict[str, Any]] = {}
    for name, numbers in results.items():
        if isinstance(numbers, dict):
            label = name.replace("_", " ")
            figures[f"{label} (wall)"] = summary(numbers.pop("_wall"), "ms")
            figures[f"{label} (cpu)"] = summary(numbers.pop("_cpu"), "ms")
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"written to {args.out}")
    emit(figures, settings={"runs": args.runs, "files": files})


if __name__ == "__main__":
    main()
