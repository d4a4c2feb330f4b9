"""kernel_bridge benchmarks: medians and ratios measured side by side in one run.

Run: .venv/bin/python benchmarks/bench_kernel.py [--quick]

Ends with the figures line the suite reads (`python -m benchmarks kernel`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from figures import emit, median_only, summary

from kernel_bridge import Finished, KernelPool, Stream
from kernel_bridge.launcher import LaunchSpec, start_local_kernel

# Every sample (seconds) by measurement, for the figures line.
SAMPLES: dict[str, list[float]] = {}


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def bench_acquire(rounds: int, work: Path) -> dict[str, float]:
    """Warm pool acquire -> first cell result, against a cold start -> first cell result."""
    warm: list[float] = []
    cold: list[float] = []
    pool = KernelPool(1)
    cold_pool = KernelPool(0)
    await pool.start()
    try:
        for _ in range(rounds):
            deadline = time.monotonic() + 60
            while pool.ready_count < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)  # wait for the refill; not part of the measurement
            await asyncio.sleep(0.3)  # let the just-started kernel settle (idle machine for both)
            start = time.perf_counter()
            session = await pool.acquire(cwd=work)
            await session.execute("1").result()
            warm.append(time.perf_counter() - start)
            await session.shutdown(final_snapshot=False)

            start = time.perf_counter()
            session = await cold_pool.acquire(cwd=work)
            await session.execute("1").result()
            cold.append(time.perf_counter() - start)
            await session.shutdown(final_snapshot=False)
    finally:
        await pool.aclose()
        await cold_pool.aclose()
    SAMPLES.update(warm=warm, cold=cold)
    return {"warm": statistics.median(warm), "cold": statistics.median(cold)}


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench_kernel_start(rounds: int, work: Path) -> dict[str, float]:
    """A local kernel launched (exec of its interpreter) against one forked from the kernel template,
    alternating: wall time start -> ready, and the kernel process's own CPU by then."""
    from kernel_bridge.kernel_template import KernelTemplates

    spec = LaunchSpec(
        python=Path(sys.executable), cwd=work, env=dict(os.environ), runtime_dir=work / "start-rt"
    )
    templates = KernelTemplates()
    try:
        warm_up = await start_local_kernel(spec, templates=templates)  # the template's own start
        await warm_up.shutdown()
        for _ in range(rounds):
            for name, given in (("launched", None), ("forked", templates)):
                start = time.perf_counter()
                kernel = await start_local_kernel(spec, templates=given)
                SAMPLES.setdefault(f"start_{name}", []).append(time.perf_counter() - start)
                SAMPLES.setdefault(f"start_cpu_{name}", []).append(_process_cpu(kernel.pid))
                await kernel.shutdown()
    finally:
        templates.close()
    return {key: statistics.median(SAMPLES[key]) for key in SAMPLES if key.startswith("start")}


async def _bare_round_trip(client: Any, code: str) -> float:
    start = time.perf_counter()
    msg_id = client.execute(code, store_history=True, allow_stdin=False)
    got_reply = got_idle = False
    while not got_reply:
        reply = await client.get_shell_msg()
        got_reply = reply["parent_header"].get("msg_id") == msg_id
    while not got_idle:
        msg = await client.get_iopub_msg()
        got_idle = (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        )
    return time.perf_counter() - start


async def bench_round_trip(rounds: int, work: Path) -> dict[str, float]:
    """execute("x=1+1") through the bridge against bare jupyter_client, interleaved."""
    pool = KernelPool(0)
    session = await pool.acquire(cwd=work)
    # The same kernel command and transport as the bridge (ipc, no history db), driven directly,
    # so the comparison is only about the bridge's own work.
    bare = await start_local_kernel(
        LaunchSpec(python=Path(sys.executable), cwd=work, env=dict(os.environ), runtime_dir=work / "bare")
    )
    client = bare.client
    bridge_times: list[float] = []
    bare_times: list[float] = []
    try:
        for _ in range(20):  # warm up both
            await session.execute("x=1+1").result()
            await _bare_round_trip(client, "x=1+1")
        for _ in range(rounds):
            start = time.perf_counter()
            await session.execute("x=1+1").result()
            bridge_times.append(time.perf_counter() - start)
            bare_times.append(await _bare_round_trip(client, "x=1+1"))
    finally:
        await bare.kill()
        await pool.aclose()
    SAMPLES.update(bridge=bridge_times, bare=bare_times)
    bridge, bare = statistics.median(bridge_times), statistics.median(bare_times)
    return {"bridge": bridge, "bare": bare, "ratio": bridge / bare}


_PRINT_TIMES = (
    "import time, sys\nfor i in range(40):\n    print(repr(time.time()), flush=True)\n    time.sleep(0.01)"
)
_SLEEP = "import time\nprint('go', flush=True)\ntime.sleep(60)"


async def _bare_chunk_latencies(client: Any) -> list[float]:
    """Baseline: the same printing cell read straight off the iopub channel."""
    msg_id = client.execute(_PRINT_TIMES, allow_stdin=False)
    latencies: list[float] = []
    while True:
        msg = await client.get_iopub_msg()
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            now = time.time()
            latencies.extend(now - float(line) for line in msg["content"]["text"].split())
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return latencies


async def _bare_interrupt(bare: Any) -> float:
    """Baseline: `interrupt_kernel` on a sleeping cell until its idle status, bare jupyter_client."""
    client = bare.client
    msg_id = client.execute(_SLEEP, allow_stdin=False)
    while True:  # running once its first output arrives, as in the bridge measurement
        msg = await client.get_iopub_msg()
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            break
    start = time.perf_counter()
    await bare.km.interrupt_kernel()
    while True:
        msg = await client.get_iopub_msg()
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            return time.perf_counter() - start


async def bench_streaming_and_interrupt(rounds: int, work: Path) -> dict[str, float]:
    """Stdout chunk latency and interrupt -> Finished, each beside bare jupyter_client."""
    pool = KernelPool(0)
    session = await pool.acquire(cwd=work)
    bare = await start_local_kernel(
        LaunchSpec(python=Path(sys.executable), cwd=work, env=dict(os.environ), runtime_dir=work / "bare-si")
    )
    latencies: list[float] = []
    bare_latencies: list[float] = []
    interrupts: list[float] = []
    bare_interrupts: list[float] = []
    try:
        run = session.execute(_PRINT_TIMES)
        async for event in run:
            if isinstance(event, Stream):
                now = time.time()
                for line in event.text.split():
                    latencies.append(now - float(line))
        bare_latencies = await _bare_chunk_latencies(bare.client)
        for _ in range(rounds):
            run = session.execute(_SLEEP)
            await anext(run)
            start = time.perf_counter()
            await session.interrupt()
            async for event in run:
                if isinstance(event, Finished):
                    interrupts.append(time.perf_counter() - start)
            bare_interrupts.append(await _bare_interrupt(bare))
    finally:
        await bare.kill()
        await pool.aclose()
    SAMPLES.update(
        chunk=latencies, bare_chunk=bare_latencies, interrupt=interrupts, bare_interrupt=bare_interrupts
    )
    return {
        "chunk": statistics.median(latencies),
        "bare_chunk": statistics.median(bare_latencies),
        "interrupt": statistics.median(interrupts),
        "bare_interrupt": statistics.median(bare_interrupts),
    }


async def bench_snapshot(rounds: int, work: Path) -> dict[str, float]:
    """Snapshot and restore of 50 MB of picklable data across 100 variables."""
    pool = KernelPool(0)
    snap = work / "snap"
    session = await pool.acquire(cwd=work, snapshot_path=snap)
    saves: list[float] = []
    restores: list[float] = []
    try:
        await session.execute(
            "import os\nfor i in range(100):\n    globals()[f'blob_{i}'] = os.urandom(500_000)"
        ).result()
        for _ in range(rounds):
            start = time.perf_counter()
            manifest = await session.snapshot()
            saves.append(time.perf_counter() - start)
            assert len(manifest["saved"]) >= 100, manifest["skipped"]
            start = time.perf_counter()
            report = await session.restore()
            restores.append(time.perf_counter() - start)
            assert len(report.restored) >= 100 and not report.failed
    finally:
        await pool.aclose()
    SAMPLES.update(snapshot=saves, restore=restores)
    return {"snapshot": statistics.median(saves), "restore": statistics.median(restores)}


async def bench_host_call(work: Path) -> dict[str, float]:
    pool = KernelPool(0)
    session = await pool.acquire(cwd=work)

    async def echo(args: dict[str, Any]) -> Any:
        return args

    session.host_bridge.register("echo", echo)
    code = (
        "import time, statistics, json\n"
        "from kernel_bridge import hostclient as bridge\n"
        "for _ in range(100):\n    bridge.call('echo', n=0)\n"
        "t = []\n"
        "for i in range(2000):\n"
        "    s = time.perf_counter(); bridge.call('echo', n=i); t.append(time.perf_counter() - s)\n"
        "print(json.dumps(statistics.median(t)))"
    )
    try:
        result = await session.execute(code).result()
        median = float(json.loads(result.output))
    finally:
        await pool.aclose()
    return {"call": median}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds (smoke run)")
    args = parser.parse_args()
    scale = 1 if args.quick else 3
    with tempfile.TemporaryDirectory(prefix="bench-kernel-") as tmp:  # holds a 50 MB snapshot
        await _run(Path(tmp), scale)


async def _run(work: Path, scale: int) -> None:
    print(f"# kernel_bridge benchmarks — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"nproc={os.cpu_count()} cpu={_cpu()} python={sys.version.split()[0]}")
    acquire = await bench_acquire(3 * scale, work)
    print(
        f"acquire warm->first result: {_ms(acquire['warm'])} | cold start->first result: {_ms(acquire['cold'])}"
        f" | warm/cold = {acquire['warm'] / acquire['cold']:.3f}   (target warm <= 50 ms)"
    )
    started = await bench_kernel_start(5 * scale, work)
    print(
        f"kernel start -> ready: launched {_ms(started['start_launched'])} | forked from the template"
        f" {_ms(started['start_forked'])}; the kernel's own CPU by then: launched"
        f" {_ms(started['start_cpu_launched'])} | forked {_ms(started['start_cpu_forked'])}"
    )
    rt = await bench_round_trip(100 * scale, work)
    print(
        f"execute('x=1+1') round trip: bridge {_ms(rt['bridge'])} | bare AsyncKernelClient {_ms(rt['bare'])}"
        f" | ratio {rt['ratio']:.3f}   (target <= 1.15)"
    )
    si = await bench_streaming_and_interrupt(3 * scale, work)
    print(
        f"stdout chunk latency (kernel print -> event): {_ms(si['chunk'])}"
        f" | bare iopub receive {_ms(si['bare_chunk'])}   (target <= 20 ms)"
    )
    print(
        f"interrupt of time.sleep(60) -> Finished: {_ms(si['interrupt'])}"
        f" | bare interrupt_kernel -> idle {_ms(si['bare_interrupt'])}   (target <= 200 ms)"
    )
    snap = await bench_snapshot(scale, work)
    print(
        f"snapshot of 50 MB / 100 variables: {_ms(snap['snapshot'])} | restore: {_ms(snap['restore'])}"
        "   (target <= 2 s each)"
    )
    host = await bench_host_call(work)
    print(f"host bridge call round trip (in-kernel median of 2000): {_ms(host['call'])}   (target <= 1 ms)")

    def ms(key: str) -> dict[str, Any]:
        return summary([t * 1000 for t in SAMPLES[key]], "ms")

    figures = {
        "acquire from a warm pool -> first cell result": ms("warm"),
        "cold start -> first cell result (baseline)": ms("cold"),
        "local kernel start -> ready, launched (baseline)": ms("start_launched"),
        "local kernel start -> ready, forked from the template": ms("start_forked"),
        "a launched kernel's own CPU by then (baseline)": ms("start_cpu_launched"),
        "a forked kernel's own CPU by then": ms("start_cpu_forked"),
        'execute("x=1+1") round trip': ms("bridge"),
        "the same on a bare AsyncKernelClient (baseline)": ms("bare"),
        "stdout chunk latency (print -> event)": ms("chunk"),
        "bare iopub receive (baseline)": ms("bare_chunk"),
        "interrupt of time.sleep(60) -> Finished": ms("interrupt"),
        "bare interrupt_kernel -> idle (baseline)": ms("bare_interrupt"),
        "snapshot of 50 MB in 100 variables": ms("snapshot"),
        "restore of the same": ms("restore"),
        # measured inside the kernel, which hands back only its median
        "host bridge call round trip (in-kernel)": median_only(host["call"] * 1000, "ms", 2000),
    }
    emit(figures, settings={"scale": scale})


if __name__ == "__main__":
    asyncio.run(main())
