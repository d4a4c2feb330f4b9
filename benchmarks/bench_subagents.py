"""Subagent benchmark: spawn to running, the parent cell's cost of `spawn`, memory per idle child.

    .venv/bin/python benchmarks/bench_subagents.py [--spawns N] [--idle N] [--json PATH]

Measured in one run, with the scripted OpenAI-compatible endpoint on 127.0.0.1 and real kernels:

* spawn -> child running, warm pool: `hub.spawn` (what the host op awaits) until it returns at
  admission with state `running`, and until the child's first model request reaches the endpoint
  (its turn is really under way). The pool holds a warm kernel for each child.
* parent cell overhead of `spawn`: `await agents.spawn(...)` timed inside a real parent kernel
  (host bridge round trip + session creation + admission), children answering text only.
* memory per idle child session, server side, kernel excluded: Python heap growth (tracemalloc)
  over N children that finished and stay open without kernels, divided by N.

Targets: spawn -> running <= 100 ms median; parent cell overhead of spawn <= 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from figures import emit, single, summary  # noqa: E402

from acp_server.cli import _KernelSkills  # noqa: E402
from agent_core import Agent, load_config  # noqa: E402
from agent_core.ports import NoEditor  # noqa: E402
from agent_core.subagents import Limits, SubagentHub  # noqa: E402
from agent_core.testing import ScriptedModelServer, stall, text  # noqa: E402


def _config(home: Path, server: ScriptedModelServer, *, pool: int, eager: bool) -> Any:
    config = load_config(
        {
            "CONTINUAL_ACP_HOME": str(home / "data"),
            "HOME": str(home),
            "CONTINUAL_ACP_MODEL": "scripted-model",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "k",
            "CONTINUAL_ACP_KERNEL_POOL": str(pool),
        }
    )
    config.eager_kernel = eager
    return config


async def _wait_idle(hub: SubagentHub, parent_id: str) -> None:
    while hub.running_children(parent_id):
        await hub.inbox(parent_id).wait(30)


async def _pool_full(agent: Agent) -> None:
    pool = agent._pool
    deadline = time.monotonic() + 60
    while pool is not None and pool.ready_count < pool.size and time.monotonic() < deadline:
        await asyncio.sleep(0.05)  # a benchmark may poll: the pool has no "refilled" event


async def spawn_to_running(spawns: int) -> dict[str, list[float]]:
    admitted: list[float] = []
    first_request: list[float] = []
    kernel_ready: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(fallback=text("done")) as server:
        home = Path(tmp)
        agent = Agent(_config(home, server, pool=2, eager=True), skills=_KernelSkills())
        hub = SubagentHub.install(agent, Limits(max_running=spawns + 1))
        await agent.start()
        try:
            parent = await agent.new_session(tmp, NoEditor())
            for i in range(spawns):
                await _pool_full(agent)  # the figure is for a warm pool
                seen = len(server.requests)
                started = time.perf_counter()
                record = await hub.spawn(parent, f"[[b{i}]] answer", name=f"b{i}")
                admitted.append((time.perf_counter() - started) * 1000)
                assert record.state == "running"
                await asyncio.to_thread(server.wait_for_requests, seen + 1, 30)
                first_request.append((time.perf_counter() - started) * 1000)
                await hub._sessions[record.session_id].kernel()
                kernel_ready.append((time.perf_counter() - started) * 1000)
                await _wait_idle(hub, parent.id)
        finally:
            await agent.aclose()
    return {"admitted_ms": admitted, "first_model_request_ms": first_request, "kernel_ready_ms": kernel_ready}


SPAWN_CELL = """
import time as _t
_times = []
for _i in range({n}):
    _s = _t.perf_counter()
    await agents.spawn(f"[[c{{_i}}]] answer", name=f"c{{_i}}")
    _times.append((_t.perf_counter() - _s) * 1000)
print(_times)
"""


async def parent_cell_overhead(spawns: int, *, queued: bool) -> list[float]:
    """Per-spawn time inside the parent's cell. `queued`: one slot, held by a stalling child, so the
    others queue and no child turn competes with the spawns for the server's event loop."""
    routes = {"[[c0]]": [stall(60.0, then="done")]} if queued else {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedModelServer(fallback=text("done"), routes=routes) as server,
    ):
        agent = Agent(_config(Path(tmp), server, pool=1, eager=False), skills=_KernelSkills())
        hub = SubagentHub.install(agent, Limits(max_running=1 if queued else spawns + 1))
        await agent.start()
        try:
            parent = await agent.new_session(tmp, NoEditor())
            kernel = await parent.kernel()
            run = kernel.execute(SPAWN_CELL.format(n=spawns + 1), timeout=120)
            async for _ in run:
                pass
            result = await run.result()
            times = [float(x) for x in json.loads(result.output.strip().splitlines()[-1])]
            await hub.cancel_all(parent.id, "benchmark over")
            await _wait_idle(hub, parent.id)
            return times[1:]  # the first spawn of a process pays one-off imports
        finally:
            await agent.aclose()


async def idle_child_memory(count: int) -> float:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer(fallback=text("done")) as server:
        agent = Agent(_config(Path(tmp), server, pool=0, eager=False))
        hub = SubagentHub.install(agent, Limits(max_running=count + 1))
        await agent.start()
        try:
            parent = await agent.new_session(tmp, NoEditor())
            # One child first: imports and caches paid once are not per-child memory.
            await hub.spawn(parent, "[[warm]] answer", name="warm")
            await _wait_idle(hub, parent.id)
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            for i in range(count):
                await hub.spawn(parent, f"[[m{i}]] answer", name=f"m{i}")
            await _wait_idle(hub, parent.id)
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            return (after - before) / count / 1024
        finally:
            await agent.aclose()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spawns", type=int, default=7)
    parser.add_argument("--idle", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    running = asyncio.run(spawn_to_running(args.spawns))
    overhead = asyncio.run(parent_cell_overhead(args.spawns, queued=True))
    overhead_busy = asyncio.run(parent_cell_overhead(args.spawns, queued=False))
    memory = asyncio.run(idle_child_memory(args.idle))
    figures = {
        "spawn_admitted_ms_median": statistics.median(running["admitted_ms"]),
        "spawn_first_model_request_ms_median": statistics.median(running["first_model_request_ms"]),
        "spawn_child_kernel_ready_ms_median": statistics.median(running["kernel_ready_ms"]),
        "parent_cell_spawn_ms_median": statistics.median(overhead),
        "parent_cell_spawn_ms_median_children_running": statistics.median(overhead_busy),
        "idle_child_kib": memory,
        "raw": {"running": running, "cell_spawn_ms": overhead, "cell_spawn_busy_ms": overhead_busy},
    }
    for key, value in figures.items():
        if key != "raw":
            print(f"{key}: {value:.2f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    emit(
        {
            "hub.spawn -> admitted (running)": summary(running["admitted_ms"], "ms"),
            "spawn -> the child's first model request": summary(running["first_model_request_ms"], "ms"),
            "spawn -> the child's kernel ready, warm pool": summary(running["kernel_ready_ms"], "ms"),
            "parent cell overhead of agents.spawn, queued": summary(overhead, "ms"),
            "same, children running": summary(overhead_busy, "ms"),
            "memory per idle child session": single(memory, "KiB"),
        },
        settings={"spawns": args.spawns, "idle": args.idle},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
