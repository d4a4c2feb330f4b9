"""agent_core benchmark: turn overhead, cancel latency, transcript append and load.

    .venv/bin/python benchmarks/bench_agent.py [--turns N] [--json PATH]

Measured in one run, with the scripted OpenAI-compatible endpoint on 127.0.0.1 answering instantly
and a real IPython kernel:

* agent overhead of a one-cell turn = turn wall time - model endpoint time (server-side handler
  time of the turn's two requests) - kernel execute time (kernel_bridge's cell duration). What is
  left is ours: prompt building, the openai client, event relay, transcript writes, bridge overhead.
  Also reported: a text-only turn's overhead (wall - endpoint time), no kernel involved.
* cancel latency: `session.cancel()` -> `TurnEnded("cancelled")`, during a stalled stream and during
  `time.sleep(60)` in a cell (the contract: within 1 s).
* session start: `new_session` time, and new session -> first cell finished, with a warm kernel
  pool (size 1, refilled between sessions) and with the pool off (cold start each time).
* transcript append: per event, 10,000 mixed events written and flushed line by line.
* transcript load: a 10,000-event transcript (plus its model messages) -> context + replay list.

Targets: overhead <= 10 ms; append <= 0.2 ms/event; load of 10,000 events <= 300 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from figures import emit, median_only  # noqa: E402

from agent_core import Agent, load_config  # noqa: E402
from agent_core import events as ev  # noqa: E402
from agent_core.history.transcript import SessionStore  # noqa: E402
from agent_core.ports import NoEditor  # noqa: E402
from agent_core.testing import ScriptedModelServer, stall, text, tool_call  # noqa: E402


def _config(home: Path, server: ScriptedModelServer) -> Any:
    config = load_config(
        {
            "CONTINUAL_ACP_HOME": str(home / "data"),
            "HOME": str(home),
            "CONTINUAL_ACP_MODEL": "scripted-model",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "k",
            "CONTINUAL_ACP_KERNEL_POOL": "0",
        }
    )
    return config


async def _turn_overheads(home: Path, turns: int) -> dict[str, Any]:
    server = ScriptedModelServer(fallback=text("ok")).start()
    try:
        agent = Agent(_config(home, server))
        await agent.start()
        session = await agent.new_session(str(home), NoEditor())
        await session.kernel()
        # Warm up: first request opens the HTTP connection, first cell imports in the kernel.
        server.push(tool_call("x = 0"), text("warm"))
        async for _ in session.run_turn([ev.TextPart("warm up")]):
            pass

        cell_overheads: list[float] = []
        cell_walls: list[float] = []
        for i in range(turns):
            server.push(tool_call(f"x += {i}\nprint(x)"), text("done"))
            before = len(server.request_times)
            started = time.perf_counter()
            duration = 0.0
            async for event in session.run_turn([ev.TextPart(f"turn {i}")]):
                if isinstance(event, ev.CellFinished):
                    duration = event.duration
            wall = time.perf_counter() - started
            endpoint = sum(server.request_times[before:])
            cell_walls.append(wall)
            cell_overheads.append(wall - endpoint - duration)

        text_overheads: list[float] = []
        for i in range(turns):
            server.push(text("plain answer"))
            before = len(server.request_times)
            started = time.perf_counter()
            async for _ in session.run_turn([ev.TextPart(f"text {i}")]):
                pass
            text_overheads.append(time.perf_counter() - started - sum(server.request_times[before:]))

        cancel_stream: list[float] = []
        cancel_cell: list[float] = []
        for kind, script, trigger in (
            ("stream", [stall(60, before="thinking")], ev.MessageChunk),
            ("cell", [tool_call("import time\nprint('go', flush=True)\ntime.sleep(60)")], ev.CellOutput),
        ):
            for _ in range(3):
                server.push(*script)
                seen = asyncio.Event()
                ended: list[float] = []

                async def consume(
                    trigger: type = trigger, seen: asyncio.Event = seen, ended: list[float] = ended
                ) -> None:
                    async for event in session.run_turn([ev.TextPart("cancel me")]):
                        if isinstance(event, trigger):
                            seen.set()
                        if isinstance(event, ev.TurnEnded):
                            ended.append(time.perf_counter())

                task = asyncio.create_task(consume())
                await asyncio.wait_for(seen.wait(), 60)
                started = time.perf_counter()
                await session.cancel()
                await asyncio.wait_for(task, 30)
                (cancel_stream if kind == "stream" else cancel_cell).append(ended[0] - started)
        await agent.aclose()
    finally:
        server.stop()
    return {
        "one_cell_turn_wall_ms": statistics.median(cell_walls) * 1000,
        "one_cell_turn_overhead_ms": statistics.median(cell_overheads) * 1000,
        "text_turn_overhead_ms": statistics.median(text_overheads) * 1000,
        "cancel_during_stream_ms": statistics.median(cancel_stream) * 1000,
        "cancel_during_cell_ms": statistics.median(cancel_cell) * 1000,
    }


async def _first_cell(home: Path, pool: int, runs: int) -> dict[str, float]:
    """`new_session` time and new session -> first cell finished, with a warm pool or cold starts."""
    news: list[float] = []
    firsts: list[float] = []
    server = ScriptedModelServer(fallback=text("ok")).start()
    try:
        config = _config(home, server)
        config.kernel_pool_size = pool
        agent = Agent(config)
        await agent.start()
        for i in range(runs):
            if pool:
                # Measure a ready pool, not one still refilling after the previous session took its kernel.
                await agent._kernel_pool()
                while agent._pool is not None and agent._pool.ready_count < pool:
                    await asyncio.sleep(0.05)
            work = home / f"first-{pool}-{i}"
            work.mkdir()
            server.push(tool_call("print('first')"), text("done"))
            started = time.perf_counter()
            session = await agent.new_session(str(work), NoEditor())
            news.append(time.perf_counter() - started)
            async for event in session.run_turn([ev.TextPart("go")]):
                if isinstance(event, ev.CellFinished):
                    firsts.append(time.perf_counter() - started)
            await agent.close_session(session.id)
        await agent.aclose()
    finally:
        server.stop()
    label = "warm_pool" if pool else "no_pool"
    return {
        f"new_session_{label}_ms": statistics.median(news) * 1000,
        f"first_cell_{label}_ms": statistics.median(firsts) * 1000,
    }


def _events(count: int) -> list[ev.TurnEvent]:
    """A realistic mix: per turn a prompt, cells with output, a message, the end."""
    out: list[ev.TurnEvent] = []
    i = 0
    while len(out) < count:
        cell = f"call_{i}"
        out += [
            ev.UserMessage((ev.TextPart(f"please do step {i} of the refactor"),), f"u{i}"),
            ev.CellStarted(cell, f"result = step({i})\nprint(result)", f"step {i}"),
            ev.CellOutput(cell, "stdout", f"step {i} ok\n" * 5),
            ev.CellFinished(cell, "completed", output=f"step {i} ok\n" * 5, duration=0.01),
            ev.MessageChunk(f"Step {i} is done; the tests pass. " * 3, f"m{i}"),
            ev.TurnEnded("end_turn"),
        ]
        i += 1
    return out[:count]


def _transcript(home: Path, count: int) -> dict[str, Any]:
    store = SessionStore(home / "t")
    events = _events(count)
    batches: list[float] = []
    writer = store.create("bench", str(home))
    batch = 500
    for start in range(0, count, batch):
        t0 = time.perf_counter()
        for event in events[start : start + batch]:
            writer.event(event)
        batches.append((time.perf_counter() - t0) / batch)
    for j in range(count // 6):  # the model messages a session of that size would also hold
        writer.message({"role": "user", "content": f"please do step {j}"})
        writer.message({"role": "assistant", "content": f"Step {j} is done."})
    writer.close()
    size = store.transcript_path("bench").stat().st_size
    loads: list[float] = []
    for _ in range(5):
        t0 = time.perf_counter()
        loaded = store.load("bench")
        loads.append(time.perf_counter() - t0)
    assert len(loaded.events) == count
    return {
        "append_ms_per_event": statistics.median(batches) * 1000,
        "load_10k_events_ms": statistics.median(loads) * 1000,
        "transcript_bytes": size,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        results = asyncio.run(_turn_overheads(home, args.turns))
        results |= asyncio.run(_first_cell(home, 1, 5))
        results |= asyncio.run(_first_cell(home, 0, 5))
        results |= _transcript(home, args.events)
    targets = {"one_cell_turn_overhead_ms": 10.0, "append_ms_per_event": 0.2, "load_10k_events_ms": 300.0}
    for key, value in results.items():
        target = targets.get(key)
        note = f"  (target <= {target}; ratio {value / target:.2f})" if target else ""
        print(f"{key:28s} {value:10.3f}{note}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    # Samples behind each median: turns per turn figure, 3 cancels, 5 sessions per pool setting, 5
    # transcript loads; the append figure is a median over batches, the size a single value.
    samples = {"cancel": 3, "new_session": 5, "first_cell": 5, "load": 5, "transcript_bytes": 1}
    emit(
        {
            key.removesuffix("_ms").replace("_", " "): median_only(
                value,
                "bytes" if key.endswith("bytes") else "ms",
                next((n for prefix, n in samples.items() if key.startswith(prefix)), args.turns)
                if not key.startswith("append")
                else None,
            )
            for key, value in results.items()
            if isinstance(value, int | float)
        },
        settings={"turns": args.turns, "events": args.events},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
