"""A hostile repository through the server beside an empty one: session/new, prompts, worst stall.

    .venv/bin/python benchmarks/bench_hostile_repo.py [--runs N]

The hostile repository is tests/edges/hostile_repo.py with every shape at once: 2,000 skills, a 60 MB
SKILL.md, SKILL.md as a FIFO, a symlink to /dev/zero, a symlink loop, a symlink to
/proc/self/environ. Each run spawns a fresh server (real stdio, the scripted model on loopback) per
repository, interleaved, and measures:

* `session/new`: request to response;
* two prompts (the system prompt, with the skill index, is built for each): the first runs one cell
  (the kernel starts; the control-plane guard takes its baseline of `.continual-acp/`), the second
  is text only: request to response;
* the worst stall of the event loop since start, as `/kernel status` reports it (acp_server/process/watchdog.py).

Medians and spread (min-max) over the runs.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for support in ("tests/acp_server", "tests/edges", "tests"):
    sys.path.insert(0, str(ROOT / support))

from acp_client import AcpClient, server_env  # noqa: E402
from acp_helpers import initialize, new_session, prompt, run_command  # noqa: E402
from figures import emit, summary  # noqa: E402
from hostile_repo import SHAPES, build  # noqa: E402

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call  # noqa: E402

TIMEOUT = 300.0
LABELS = {
    "worst stall": "worst event-loop stall",
    "prompt 1": "prompt 1 (one cell)",
    "prompt 2": "prompt 2 (text)",
}
STALL = re.compile(r"worst stall ([0-9.]+) s")


def _one(kind: str, base: Path, model: ScriptedModelServer) -> dict[str, float]:
    project = base / kind
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    if kind == "hostile":
        build(project, list(SHAPES))
    home = base / f"{kind}-home"
    home.mkdir()
    client = AcpClient(server_env(home, model.base_url), cwd=str(project))
    try:
        initialize(client)
        started = time.perf_counter()
        sid, _ = new_session(client, project)
        result = {"session/new": time.perf_counter() - started}
        for name in ("prompt 1", "prompt 2"):
            started = time.perf_counter()
            prompt(client, sid, name, timeout=TIMEOUT)
            result[name] = time.perf_counter() - started
        found = STALL.search(run_command(client, sid, "/kernel status", timeout=TIMEOUT))
        result["worst stall"] = float(found[1]) if found else float("nan")
    finally:
        client.close(timeout=TIMEOUT)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    samples: dict[str, list[dict[str, float]]] = {"empty": [], "hostile": []}
    for run in range(args.runs):
        for kind in ("empty", "hostile"):  # interleaved: machine load hits both alike
            script = [tool_call("print(len(skills.list()))"), text("ran")]
            with ScriptedModelServer(script, fallback=text("done")) as model:
                with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
                    samples[kind].append(_one(kind, Path(tmp), model))
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    metrics = ("session/new", "prompt 1", "prompt 2", "worst stall")
    print(f"| metric (s, {args.runs} runs) | empty: median (min-max) | hostile: median (min-max) |")
    print("| --- | --- | --- |")
    for metric in metrics:
        cells = []
        for kind in ("empty", "hostile"):
            values = [s[metric] for s in samples[kind]]
            cells.append(f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")
        print(f"| {metric} | {cells[0]} | {cells[1]} |")
    emit(
        {
            f"{LABELS.get(metric, metric)}: {kind} repository": summary(
                [s[metric] for s in samples[kind]], "s"
            )
            for metric in metrics
            for kind in ("empty", "hostile")
        },
        settings={"runs": args.runs},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
