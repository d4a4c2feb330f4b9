"""The launch seam's cost: a server git (`safe_git.run_git`) beside a plain `git`, a program run through
the seam beside a plain spawn, and the workspace checkpoint a prompt takes before its first cell
(`git stash create` + `rev-parse`), interleaved; wall and CPU (this process's children) medians.

Run: .venv/bin/python benchmarks/bench_launch_seam.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from figures import emit, summary

from kernel_bridge import workspace_launch
from kernel_bridge.safe_git import run_git

_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.invalid",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.invalid",
}


def _repo(root: Path) -> Path:
    """A repository of 200 small files, one of them modified."""
    repo = root / "repo"
    (repo / "src").mkdir(parents=True)
    for i in range(200):
        (repo / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True, env=_ENV)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=_ENV)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "init"], check=True, env=_ENV)
    (repo / "src" / "m0.py").write_text("x = -1\n")
    return repo


def _measure(fn: Callable[[], object]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    fn()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall * 1000, cpu * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        repo = _repo(Path(tmp))
        plain_git = ["git", "-C", str(repo)]
        config = {"user.name": "b", "user.email": "b@example.invalid"}
        cases: dict[str, Callable[[], object]] = {
            "git status (plain)": lambda: subprocess.run(
                [*plain_git, "status", "--porcelain"], capture_output=True
            ),
            "git status (safe_git)": lambda: run_git(repo, "status", "--porcelain"),
            "checkpoint git (plain)": lambda: (
                subprocess.run(
                    [*plain_git, "-c", "user.name=b", "-c", "user.email=b@x", "stash", "create", "c"],
                    capture_output=True,
                ),
                subprocess.run([*plain_git, "rev-parse", "HEAD"], capture_output=True),
            ),
            "checkpoint git (safe_git)": lambda: (
                run_git(repo, "stash", "create", "c", config=config),
                run_git(repo, "rev-parse", "HEAD"),
            ),
            "true (plain spawn)": lambda: subprocess.run(["true"]),
        }
        with workspace_launch.policy(repo, confine=False) as launch:
            cases["true (through the seam)"] = lambda: workspace_launch.run(["true"], launch)
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
            for _ in range(rounds):  # interleaved: load changes hit every case alike
                for name, fn in cases.items():
                    samples[name].append(_measure(fn))
    table = {
        name: {
            "wall_median_ms": round(statistics.median(w for w, _ in got), 1),
            "cpu_median_ms": round(statistics.median(c for _, c in got), 1),
        }
        for name, got in samples.items()
    }
    print(json.dumps({"rounds": rounds, "load": os.getloadavg(), "results": table}, indent=2))
    figures = {}
    for name, got in samples.items():
        figures[f"{name} (wall)"] = summary([w for w, _ in got], "ms")
        figures[f"{name} (cpu)"] = summary([c for _, c in got], "ms")
    emit(figures, settings={"rounds": rounds})


if __name__ == "__main__":
    main()
