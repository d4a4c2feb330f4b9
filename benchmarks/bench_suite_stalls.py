"""The worst event-loop stall of every server the test suite starts.

    .venv/bin/python benchmarks/bench_suite_stalls.py [pytest arguments...]
    .venv/bin/python benchmarks/bench_suite_stalls.py --reports DIR   # a run made with the variable set


Runs pytest (by default the whole suite as `.ci/run` runs it: `-n <cores + 1> --dist loadgroup`) with
`CONTINUAL_ACP_STALL_REPORT` set to a fresh directory. Every server the suite's stdio tests start
(`tests/acp_server/acp_client.py` passes the variable on) writes its worst stall at exit
(`acp_server/process/watchdog.py`: `stall-<pid>.json`, with the loop's stack during that stall). The report:
how many servers reported, the median and the 99th percentile of their worst stalls, how many went
over 1 s and over the 10 s stall threshold, and the five worst with the innermost frames of the stack
the watchdog saw during each.

A stall here includes what the machine's load does to a server (the suite runs one pytest worker
more than cores), so it is an upper bound on what the server's own code blocks; the stack says which.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # `figures`, as every benchmark imports it

from figures import emit, single, summary  # noqa: E402


def _innermost(stack: str | None, frames: int = 3) -> str:
    if not stack:
        return "(no stack: shorter than the watchdog's 0.5 s stack point)"
    # importlib's own frames say only that an import runs: the frames that asked for it say which.
    lines = [
        line.strip()
        for line in stack.strip().splitlines()
        if line.strip().startswith("File ") and "<frozen " not in line
    ]
    if not lines:
        return "(empty stack)"
    # And the innermost frame of the server's own code: where the loop made the blocking call.
    own = [
        line
        for line in lines
        if str(ROOT) in line and "site-packages" not in line and not line.endswith("in <module>")
    ]
    shown = list(reversed(lines[-frames:]))
    if own and own[-1] not in shown:
        shown.append("... " + own[-1])
    return " <- ".join(shown)


def _read(reports: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted(reports.glob("stall-*.json")):
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            print(f"unreadable report {path.name}: {exc}", file=sys.stderr)
    return found


def main(argv: list[str]) -> int:
    if argv[:1] == ["--reports"] and len(argv) == 2:
        found, ran = _read(Path(argv[1])), "reports read from " + argv[1]
    else:
        workers = (os.cpu_count() or 1) + 1
        pytest_args = argv or ["-q", "-n", str(workers), "--dist", "loadgroup", "-p", "no:cacheprovider"]
        with tempfile.TemporaryDirectory(prefix="bench-stalls-") as reports:
            # Exec every server: a forked one (tests/acp_server/server_zygote.py) has no import stalls.
            env = {**os.environ, "CONTINUAL_ACP_STALL_REPORT": reports, "CONTINUAL_ACP_TEST_LAUNCH": "exec"}
            done = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT, env=env)
            found, ran = _read(Path(reports)), f"pytest exit code {done.returncode}"
    if not found:
        print("no server wrote a stall report", file=sys.stderr)
        return 1
    worst = sorted((r["worst_stall_seconds"] for r in found), reverse=True)
    p99 = worst[max(0, int(len(worst) * 0.01) - 1)] if len(worst) >= 100 else worst[0]
    print(f"{ran}; servers reporting: {len(found)}")
    print("| worst stall per server (s) | value |")
    print("| --- | --- |")
    print(f"| median | {statistics.median(worst):.3f} |")
    print(f"| 99th percentile | {p99:.3f} |")
    print(f"| maximum | {worst[0]:.3f} |")
    print(f"| servers over 1 s | {sum(1 for w in worst if w > 1.0)} |")
    print(f"| servers over the 10 s threshold | {sum(1 for w in worst if w >= 10.0)} |")
    print()
    print("The five worst, with the innermost frames the watchdog saw during each:")
    worst_five = sorted(found, key=lambda r: -r["worst_stall_seconds"])[:5]
    for report in worst_five:
        print(f"* {report['worst_stall_seconds']:.3f} s: {_innermost(report.get('stack'))}")
    emit(
        {
            "worst stall per server": summary(worst, "s"),
            "maximum": single(worst[0], "s"),
            "servers over 1 s": single(sum(1 for w in worst if w > 1.0), "servers"),
            "servers over 10 s": single(sum(1 for w in worst if w >= 10.0), "servers"),
        },
        servers=len(found),
        worst=[f"{r['worst_stall_seconds']:.3f} s: {_innermost(r.get('stack'))}" for r in worst_five],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
