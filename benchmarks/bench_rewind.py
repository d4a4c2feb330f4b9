"""Checkpoint and rewind benchmarks: the per-prompt checkpoint of a kernel holding 50 MB when nothing
changed (target <= 10 ms median) beside a full snapshot of the same kernel, and the rewind of a
50-prompt session (target <= 1 s), through a real Agent, kernel and scripted endpoint.

Run: .venv/bin/python benchmarks/bench_rewind.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from figures import emit, from_spread, single

from agent_core import Agent, TextPart, load_config
from agent_core.history.rewind import plan_rewind, rewind
from agent_core.ports import NoEditor
from agent_core.testing import ScriptedModelServer
from agent_core.testing.scripted_model import text, tool_call
from kernel_bridge import KernelPool
from kernel_bridge.checkpoints import CheckpointBounds

# 50 distinct 1 MB values (random, so the content-addressed store cannot fold them into one).
FIFTY_MB = "import os\n" + "\n".join(f"v{i} = os.urandom(1 << 20)" for i in range(50))


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _spread(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p10_ms": ordered[len(ordered) // 10] * 1000,
        "p90_ms": ordered[(len(ordered) * 9) // 10] * 1000,
        "n": len(ordered),
    }


async def bench_checkpoint(rounds: int, work: Path) -> dict[str, Any]:
    """Checkpoint after a cell that changed nothing of the 50 MB, interleaved with a full snapshot."""
    pool = KernelPool(0)
    await pool.start()
    try:
        session = await pool.acquire(cwd=work, snapshot_path=work / "state")
        assert (await session.execute(FIFTY_MB).result()).status == "ok"
        bounds = CheckpointBounds(max_count=10_000, max_bytes=1 << 34)
        first = time.perf_counter()
        initial = await session.checkpoint("b0", bounds)
        initial_s = time.perf_counter() - first
        checkpoints: list[float] = []
        snapshots: list[float] = []
        empty: list[float] = []  # an internal cell that does nothing: the round trip every checkpoint pays
        for i in range(rounds):
            await session.execute(f"counter = {i}").result()  # a prompt's cell that leaves the 50 MB alone
            start = time.perf_counter()
            summary = await session.checkpoint(f"b{i + 1}", bounds)
            checkpoints.append(time.perf_counter() - start)
            assert summary["reused"] >= 50, summary
            start = time.perf_counter()
            async with session._lock:  # the same path a checkpoint's cell takes, with no work in it
                await session._internal("_cak_.last_result = '1'", 10.0)
            empty.append(time.perf_counter() - start)
            start = time.perf_counter()
            await session.snapshot()
            snapshots.append(time.perf_counter() - start)
        await session.shutdown(final_snapshot=False)
    finally:
        await pool.aclose()
    return {
        "stored_mb": initial["bytes"] / 1e6,
        "first_checkpoint_ms": initial_s * 1000,
        "checkpoint": _spread(checkpoints),
        "empty_internal_cell": _spread(empty),
        "full_snapshot": _spread(snapshots),
    }


async def bench_rewind(prompts: int, repeats: int, work: Path) -> dict[str, Any]:
    """A session of `prompts` prompts (the first loads 50 MB, each sets a variable); then rewinds."""
    script = [tool_call(FIFTY_MB), text("loaded")]
    for i in range(1, prompts):
        script += [tool_call(f"x{i} = [{i}] * 1000"), text("set")]
    results: dict[str, list[float]] = {"rewind_1": [], "rewind_all_but_first": []}
    with ScriptedModelServer(script) as model:
        env = {
            "CONTINUAL_ACP_HOME": str(work / "home"),
            "HOME": str(work),
            "CONTINUAL_ACP_KERNEL_POOL": "0",
            "CONTINUAL_ACP_MODEL": "scripted",
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "k",
            "XDG_CONFIG_HOME": str(work / "xdg"),
        }
        config = load_config(env)
        config.eager_kernel = False
        agent = Agent(config)
        await agent.start()
        try:
            session = await agent.new_session(str(work), NoEditor())
            build = time.perf_counter()
            for i in range(prompts):
                async for _ in session.run_turn([TextPart(f"prompt {i}")]):
                    pass
            build_s = time.perf_counter() - build
            transcript_kb = session.store.transcript_path(session.id).stat().st_size / 1000
            # Rewind one prompt, then (the longest) back to before prompt 2: 48 prompts cut, 48 names go.
            for key, turns in (("rewind_1", 1), ("rewind_all_but_first", None)):
                for _ in range(repeats if key == "rewind_1" else 1):
                    n = turns if turns is not None else len(session.checkpoints.index.entries) - 1
                    start = time.perf_counter()
                    outcome = await rewind(session, plan_rewind(session, turns=n))
                    results[key].append(time.perf_counter() - start)
                    assert not outcome.kernel.get("failed"), outcome.kernel
            removed = len(outcome.kernel.get("removed", []))
            await agent.close_session(session.id)
        finally:
            await agent.aclose()
    return {
        "prompts": prompts,
        "build_s": build_s,
        "transcript_kb": transcript_kb,
        "rewind_1": _spread(results["rewind_1"]),
        "rewind_all_but_first_ms": results["rewind_all_but_first"][0] * 1000,
        "names_removed_by_the_long_rewind": removed,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--prompts", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "a").mkdir()
        (work / "b").mkdir()
        checkpoint = asyncio.run(bench_checkpoint(args.rounds, work / "a"))
        rewinding = asyncio.run(bench_rewind(args.prompts, 5, work / "b"))
    report = {
        "machine": {
            "cpu": _cpu(),
            "cores": os.cpu_count(),
            "load": os.getloadavg(),
            "python": platform.python_version(),
        },
        "checkpoint_50mb_unchanged": checkpoint,
        "rewind": rewinding,
    }
    print(json.dumps(report, indent=1))
    emit(
        {
            "checkpoint, 50 MB held, nothing changed": from_spread(checkpoint["checkpoint"]),
            "empty internal cell (same run)": from_spread(checkpoint["empty_internal_cell"]),
            "full snapshot of the same kernel": from_spread(checkpoint["full_snapshot"]),
            "first checkpoint (everything stored)": single(checkpoint["first_checkpoint_ms"], "ms"),
            "rewind of a 50-prompt session by one prompt": from_spread(rewinding["rewind_1"]),
            "rewind to before prompt 2": single(rewinding["rewind_all_but_first_ms"], "ms"),
        },
        settings={"rounds": args.rounds, "prompts": args.prompts},
    )


if __name__ == "__main__":
    main()
