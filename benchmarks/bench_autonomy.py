"""Autonomous-mode benchmarks against their targets. Prints medians measured in one run.

    .venv/bin/python benchmarks/bench_autonomy.py [--quick]

* workspace fingerprint of a git repository with 10,000 files (clean, and with edits + untracked)
* workspace fingerprint of a non-git tree with 10,000 files (the bounded walk)
* loop overhead per continuation, excluding model and gate time: the model turn is a no-op and the
  gate is `true`; the cost of a bare `sh -c true` is measured in the same run and subtracted
* gate pinning: resolving a `python -m pytest` gate (the probe process and the digests), done at the
  loop's start and again before every gate run
* the tamper watch of a git repository with 10,000 files, with and without the runner files
  (`protect_runner_files`: a walk that also finds git-ignored ones)

Ends with the figures line the suite reads (`python -m benchmarks autonomy`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from figures import emit, single, summary

from agent_core import events as ev
from agent_core.autonomy import (
    AutonomyState,
    Gate,
    LoopLimits,
    run_autonomous,
    run_gate,
    workspace_fingerprint,
)
from agent_core.autonomy.pinning import gate_environment, pin_gate
from agent_core.autonomy.tamper import TamperWatch, runner_patterns
from agent_core.config.referee_defaults import DEFAULT_RUNNER_FILES, DEFAULT_TEST_PATTERNS


def make_tree(root: Path, files: int) -> None:
    for i in range(files):
        directory = root / f"pkg{i % 100:03d}"
        directory.mkdir(exist_ok=True)
        (directory / f"mod{i:05d}.py").write_text(f"VALUE_{i} = {i}\n" * 5)


def git(root: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
    }
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)


SAMPLES: dict[str, list[float]] = {}  # every sample (ms) by figure name, for the figures line


def median_ms(fn: object, runs: int, figure: str) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    SAMPLES[figure] = times
    return statistics.median(times)


class NoopHost:
    def __init__(self, root: Path, turns: int) -> None:
        self.root = root
        self.turns = turns
        self.state = AutonomyState()
        self.value = 0

    @property
    def cwd(self) -> str:
        return str(self.root)

    async def model_turn(self, parts: Sequence[ev.PromptPart]) -> ev.StopReason:
        self.value += 1
        (self.root / "app.py").write_text(f"V = {self.value}\n")  # a change, so the gate reruns
        return "end_turn"

    def billable_tokens(self) -> int:
        return 0

    def gates(self) -> tuple[Gate, ...]:
        return (Gate("exit 1"),)

    def autonomy_state(self) -> AutonomyState:
        return self.state

    def save_autonomy_state(self, state: AutonomyState) -> None:
        self.state = state

    def gate_environment(self, gate: Gate) -> Mapping[str, str]:
        return {"PATH": os.environ["PATH"]}

    async def before_gate(self, gate: Gate) -> None:
        return None

    async def after_gate(self, gate_id: str, gate: Gate) -> str | None:
        return None

    def checkpoint(self, continuation: int) -> None:
        return None


async def loop_overhead(root: Path, continuations: int) -> tuple[float, list[float]]:
    host = NoopHost(root, continuations)
    start = time.perf_counter()
    await run_autonomous(
        host, [ev.TextPart("x")], lambda e: None, LoopLimits(max_continuations=continuations)
    )
    per_continuation = (time.perf_counter() - start) * 1000 / (continuations + 1)
    bare = []
    for _ in range(continuations + 1):
        t = time.perf_counter()
        await run_gate(Gate("exit 1"), str(root), env={"PATH": os.environ["PATH"]})
        bare.append((time.perf_counter() - t) * 1000)
    return per_continuation, bare


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 5 if args.quick else 15
    files = 10_000
    print(f"# bench_autonomy  {platform.node()}  cpus={os.cpu_count()}  python={platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        make_tree(repo, files)
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "x")
        workspace_fingerprint(repo)  # warm the OS cache and git's index stat data
        clean = median_ms(
            lambda: workspace_fingerprint(repo), runs, f"fingerprint, git, {files:,} files, clean"
        )
        for i in range(20):
            (repo / f"pkg{i:03d}" / f"mod{i:05d}.py").write_text("changed\n")
            (repo / f"untracked{i}.txt").write_text("u" * 2000)
        dirty = median_ms(
            lambda: workspace_fingerprint(repo), runs, f"fingerprint, git, {files:,} files, 20 edits + 20 new"
        )

        def watch(shadowing: Sequence[str]) -> None:
            TamperWatch.start(
                repo, patterns=DEFAULT_TEST_PATTERNS, gates=(), protected=(), shadowing=shadowing
            ).changes()

        watch_plain = median_ms(lambda: watch(()), runs, f"tamper watch start + compare, {files:,} files")
        watch_runner = median_ms(
            lambda: watch(runner_patterns(DEFAULT_RUNNER_FILES, ["pytest"])),
            runs,
            "the same with runner files protected",
        )
        command = f"{sys.executable} -m pytest -q"
        env = gate_environment(os.environ, repo, command)
        pin = median_ms(lambda: pin_gate(command, repo, env), runs, "pin a python -m pytest gate")
        plain = Path(tmp) / "plain"
        plain.mkdir()
        make_tree(plain, files)
        workspace_fingerprint(plain)
        walk = median_ms(
            lambda: workspace_fingerprint(plain), runs, f"fingerprint, no git, {files:,} files (walk)"
        )
        loop_root = Path(tmp) / "loop"
        loop_root.mkdir()
        git(loop_root, "init", "-q")
        continuations = 10 if args.quick else 20
        per, bare_samples = asyncio.run(loop_overhead(loop_root, continuations))
        bare = statistics.median(bare_samples)
    print(f"fingerprint, git, {files} files, clean            median {clean:8.1f} ms  (target <= 150)")
    print(f"fingerprint, git, {files} files, 20 edits + 20 new median {dirty:8.1f} ms  (target <= 150)")
    print(f"fingerprint, no git, {files} files (walk)          median {walk:8.1f} ms  (target <= 150)")
    print(f"tamper watch start + compare, {files} files       median {watch_plain:8.1f} ms")
    print(f"  the same with the runner files protected         median {watch_runner:8.1f} ms")
    print(f"pin a `python -m pytest` gate (probe + digests)    median {pin:8.1f} ms  (per gate run)")
    print(
        f"loop per continuation (fingerprint + gate + bookkeeping) {per:8.1f} ms; bare gate process {bare:6.1f} ms"
    )
    print(
        f"loop overhead per continuation excluding model and gate time: {per - bare:8.1f} ms  (target <= 20; this"
    )
    print("  includes the fingerprint of a small git repo, a few git processes)")
    figures = {name: summary(times, "ms") for name, times in SAMPLES.items()}
    # The loop is timed as a whole: its figure is the mean over its continuations, not a median.
    figures["loop per continuation (fingerprint + gate + bookkeeping), mean"] = single(per, "ms")
    figures["bare gate process (baseline)"] = summary(bare_samples, "ms")
    figures["loop overhead per continuation excluding model and gate time"] = single(per - bare, "ms")
    emit(figures, settings={"runs": runs, "files": files, "continuations": continuations})


if __name__ == "__main__":
    main()
