"""How long the test suite takes, and where its time goes.

    .venv/bin/python benchmarks/bench_suite_time.py [pytest arguments...]
    .venv/bin/python benchmarks/bench_suite_time.py --junit REPORT.xml   # a finished run's report

Runs pytest as `.ci/run` does (`-n <cores + 1> --dist loadgroup`, with a JUnit report), or reads the
report of a run already made (a fresh-clone `CI=true bash .ci/run --junitxml=REPORT.xml`). The
figures: pytest's wall time (the budget is 10 minutes on 2 cores), the tests run, the seconds the
workers spent in tests (their sum over files: what the wall time is packed from), and the five files
that took longest. A run made here also counts the CPU seconds each file cost, its servers, kernels
and helpers included (the plugin `suite_cpu.py`): on 2 cores the suite is CPU-bound, so that is what
a cut has to shrink; the ten costliest files are listed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # `figures`, as every benchmark imports it

from figures import emit, single  # noqa: E402


def read_report(path: Path) -> tuple[float, int, Counter[str]]:
    """(pytest's wall seconds, tests run, seconds per test file) of a JUnit report."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    wall = sum(float(s.get("time", 0)) for s in suites)
    per_file: Counter[str] = Counter()
    tests = 0
    for case in root.iter("testcase"):
        tests += 1
        name = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        per_file[name] += float(case.get("time", 0))
    return wall, tests, per_file


def read_cpu(directory: Path) -> Counter[str]:
    """CPU seconds per test file, summed over the workers' files that `suite_cpu.py` wrote."""
    per_file: Counter[str] = Counter()
    for worker in directory.glob("*.json"):
        for name, (cpu, _wall) in json.loads(worker.read_text(encoding="utf-8")).items():
            per_file[name] += cpu
    return per_file


def main(argv: list[str]) -> int:
    cpu: Counter[str] = Counter()
    if argv[:1] == ["--junit"] and len(argv) == 2:
        wall, tests, per_file = read_report(Path(argv[1]))
        ran = "report read from " + argv[1]
    else:
        workers = (os.cpu_count() or 1) + 1
        pytest_args = argv or ["-q", "-n", str(workers), "--dist", "loadgroup", "-p", "no:cacheprovider"]
        with tempfile.TemporaryDirectory(prefix="bench-suite-time-") as tmp:
            report = Path(tmp) / "report.xml"
            cpu_dir = Path(tmp) / "cpu"
            cpu_dir.mkdir()
            here = str(Path(__file__).resolve().parent)
            env = {
                **os.environ,
                "CONTINUAL_ACP_SUITE_CPU_DIR": str(cpu_dir),
                "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])),
            }
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "suite_cpu", *pytest_args, f"--junitxml={report}"],
                cwd=ROOT,
                env=env,
            )
            if not report.is_file():
                print(f"pytest wrote no report (exit code {done.returncode})", file=sys.stderr)
                return 1
            wall, tests, per_file = read_report(report)
            cpu = read_cpu(cpu_dir)
            ran = f"pytest exit code {done.returncode}"
    busy = sum(per_file.values())
    longest = per_file.most_common(5)
    print(f"{ran}; {tests} tests")
    print(
        f"| figure | value |\n| --- | --- |\n| pytest wall | {wall:.0f} s |\n| worker seconds in tests | {busy:.0f} s |"
    )
    for name, seconds in longest:
        print(f"| {name} | {seconds:.0f} s |")
    figures: dict[str, Any] = {
        "pytest wall time": single(wall, "s"),
        "tests": single(tests, "tests"),
        "worker seconds in tests": single(busy, "s"),
    }
    extra: dict[str, Any] = {"longest": [f"{name}: {seconds:.0f} s" for name, seconds in longest]}
    if cpu:
        costliest = cpu.most_common(10)
        print(f"| CPU seconds in tests | {sum(cpu.values()):.0f} s |")
        for name, seconds in costliest:
            print(f"| CPU: {name} | {seconds:.0f} s |")
        figures["CPU seconds in tests"] = single(sum(cpu.values()), "s")
        extra["costliest"] = [f"{name}: {seconds:.0f} CPU s" for name, seconds in costliest]
    emit(figures, **extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
