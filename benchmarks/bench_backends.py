"""Kernel backends side by side in one run: local, sandbox (bubblewrap; Landlock + seccomp),
provisioner (a kernelspec naming jupyter_client's local-provisioner), Jupyter Kernel Gateway.

Per backend: cold start to first result, warm acquire to first result (pooled kernel; a sandbox
kernel is warmed for the workspace of the last session, so one unmeasured session primes it),
`x=1+1` round trip, and interrupt latency (interrupt call -> the sleeping cell has finished).
The gateway is a real `jupyter kernelgateway` started on 127.0.0.1 by this script.

The per-backend figures are measured one backend after another, so a load change between them
moves the ratios. `interleaved` therefore holds one session per local-process backend (local,
bubblewrap, Landlock) open at once and alternates their `x=1+1` trips (the order rotated each
round): the round-trip ratio of each sandbox tier vs the unsandboxed kernel under the same load.

Run: .venv/bin/python benchmarks/bench_backends.py [--rounds N] [--trips N] [--backends local,landlock]
     [--interleaved-only]
Ends with the figures line the suite reads (`python -m benchmarks backends`).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "kernel_bridge"))

from figures import emit, median_only, single, summary
from gateway_support import start_gateway, stop_gateway

from kernel_bridge import KernelPool, KernelSession
from kernel_bridge.gateway import GatewayLauncher
from kernel_bridge.gateway_rest import GatewaySettings
from kernel_bridge.provisioner import ProvisionerLauncher
from kernel_bridge.sandbox import SandboxLauncher, probe_bubblewrap, probe_landlock


def _median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 2)


async def _first_result(pool: KernelPool, work: Path) -> tuple[float, KernelSession]:
    start = time.perf_counter()
    session = await pool.acquire(cwd=work)
    await session.execute("1").result()
    return time.perf_counter() - start, session


async def bench(
    name: str, make_launcher: Callable[[], Any] | None, rounds: int, trips: int, work: Path
) -> dict[str, Any]:
    """All four figures for one backend."""
    kwargs: dict[str, Any] = {} if make_launcher is None else {"launcher": make_launcher()}
    cold_pool = KernelPool(0, **kwargs)
    cold: list[float] = []
    warm: list[float] = []
    trip: list[float] = []
    interrupt: list[float] = []
    try:
        for _ in range(rounds):
            seconds, session = await _first_result(cold_pool, work)
            cold.append(seconds)
            await session.shutdown(final_snapshot=False)
        warm_kwargs: dict[str, Any] = {} if make_launcher is None else {"launcher": make_launcher()}
        warm_pool = KernelPool(1, refill_delay=0, **warm_kwargs)
        await warm_pool.start()
        try:
            _, primer = await _first_result(warm_pool, work)  # tells a sandbox pool the workspace
            await primer.shutdown(final_snapshot=False)
            for _ in range(rounds):
                deadline = time.monotonic() + 60
                while warm_pool.ready_count < 1 and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)  # wait for the refill; not part of the measurement
                await asyncio.sleep(0.3)
                seconds, session = await _first_result(warm_pool, work)
                warm.append(seconds)
                await session.shutdown(final_snapshot=False)
        finally:
            await warm_pool.aclose()
        _, session = await _first_result(cold_pool, work)
        for _ in range(trips):
            start = time.perf_counter()
            await session.execute("x=1+1").result()
            trip.append(time.perf_counter() - start)
        for _ in range(max(3, rounds)):
            run = session.execute("import time\ntime.sleep(30)")
            await run.started.wait()
            await asyncio.sleep(0.3)
            start = time.perf_counter()
            await session.interrupt()
            await run.result()
            interrupt.append(time.perf_counter() - start)
        await session.shutdown(final_snapshot=False)
    finally:
        await cold_pool.aclose()
    return {
        "backend": name,
        "cold_start_to_first_result_ms": _median_ms(cold),
        "warm_acquire_to_first_result_ms": _median_ms(warm),
        "x_1_plus_1_round_trip_ms": _median_ms(trip),
        "interrupt_latency_ms": _median_ms(interrupt),
    }


# The interleaved trips (seconds) by backend, for the figures line.
INTERLEAVED: dict[str, list[float]] = {}


async def interleaved(
    launchers: dict[str, Callable[[], Any] | None], trips: int, work: Path
) -> dict[str, Any]:
    """`x=1+1` round trips of every backend in `launchers`, alternated trip by trip in one run."""
    pools = {
        name: KernelPool(0, **({} if make is None else {"launcher": make()}))
        for name, make in launchers.items()
    }
    times: dict[str, list[float]] = {name: [] for name in launchers}
    try:
        sessions = {name: (await _first_result(pool, work))[1] for name, pool in pools.items()}
        names = list(sessions)
        for _ in range(5):  # warm-up trips, not measured
            for name in names:
                await sessions[name].execute("x=1+1").result()
        for i in range(trips):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                start = time.perf_counter()
                await sessions[name].execute("x=1+1").result()
                times[name].append(time.perf_counter() - start)
        for session in sessions.values():
            await session.shutdown(final_snapshot=False)
    finally:
        for pool in pools.values():
            await pool.aclose()
    INTERLEAVED.update(times)
    local = statistics.median(times["local"])
    return {
        "trips_each": trips,
        "round_trip_median_ms": {name: _median_ms(values) for name, values in times.items()},
        "round_trip_ratio_vs_local": {
            name: round(statistics.median(values) / local, 3) for name, values in times.items()
        },
        # The ratio of medians hides how often a tier is slower trip for trip: the paired view.
        "paired_trip_ratio_median": {
            name: round(statistics.median(v / lo for v, lo in zip(values, times["local"], strict=True)), 3)
            for name, values in times.items()
        },
    }


def _local_provisioner_spec(root: Path) -> Path:
    """A kernelspec that names the local provisioner (the SSH/Kubernetes ones need other hosts)."""
    spec_dir = root / "bench-provisioned"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "bench-provisioned",
        "language": "python",
        "metadata": {"kernel_provisioner": {"provisioner_name": "local-provisioner"}},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return root


def _sandbox_tiers(backends: list[str]) -> dict[str, Callable[[], Any] | None]:
    """The local kernel and each requested sandbox tier this machine supports."""
    launchers: dict[str, Callable[[], Any] | None] = {"local": None}
    if "sandbox" in backends:
        probe = probe_bubblewrap()
        if probe.ok:
            launchers["sandbox (bubblewrap)"] = lambda: SandboxLauncher(tier="bubblewrap")
        else:
            print(f"sandbox skipped: {probe.reason}", file=sys.stderr)
    if "landlock" in backends:
        probe = probe_landlock()
        if probe.ok:
            launchers["sandbox (landlock)"] = lambda: SandboxLauncher(tier="landlock")
        else:
            print(f"landlock skipped: {probe.reason}", file=sys.stderr)
    return launchers


def _meta(rounds: int, trips: int, load_before: tuple[float, float, float]) -> dict[str, Any]:
    return {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "rounds": rounds,
        "trips": trips,
    }


async def main(rounds: int, trips: int, backends: list[str], interleaved_only: bool) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-backends-"))
    load_before = os.getloadavg()
    tiers = _sandbox_tiers(backends)
    if interleaved_only:
        mixed = await interleaved(tiers, trips, work)
        print(json.dumps({"meta": _meta(rounds, trips, load_before), "interleaved": mixed}, indent=1))
        emit_figures(mixed, [], trips)
        return
    results = [await bench("local", None, rounds, trips, work)]
    if "sandbox" in backends:
        probe = probe_bubblewrap()
        if probe.ok:
            results.append(await bench("sandbox", SandboxLauncher, rounds, trips, work))
        else:
            print(f"sandbox skipped: {probe.reason}", file=sys.stderr)
    if "landlock" in backends:
        probe = probe_landlock()
        if probe.ok:
            launcher = lambda: SandboxLauncher(tier="landlock")  # noqa: E731
            results.append(await bench("sandbox (landlock)", launcher, rounds, trips, work))
        else:
            print(f"landlock skipped: {probe.reason}", file=sys.stderr)
    if "provisioner" in backends:
        specs = str(_local_provisioner_spec(Path(tempfile.mkdtemp(prefix="bench-specs-"))))
        launcher = lambda: ProvisionerLauncher("bench-provisioned", kernel_dirs=[specs])  # noqa: E731
        results.append(await bench("provisioner (local)", launcher, rounds, trips, work))
    if "gateway" in backends:
        gateway = start_gateway(Path(tempfile.mkdtemp(prefix="bench-gw-")))
        try:
            settings = GatewaySettings(gateway.url, gateway.token)
            results.append(await bench("gateway", lambda: GatewayLauncher(settings), rounds, trips, work))
        finally:
            stop_gateway(gateway)
    local_trip = results[0]["x_1_plus_1_round_trip_ms"]
    for row in results:
        row["round_trip_ratio_vs_local"] = round(row["x_1_plus_1_round_trip_ms"] / local_trip, 3)
    paired = await interleaved(tiers, trips, work) if len(tiers) > 1 else None
    output = {"meta": _meta(rounds, trips, load_before), "results": results, "interleaved": paired}
    print(json.dumps(output, indent=1))
    emit_figures(paired, results, trips)


def emit_figures(mixed: dict[str, Any] | None, results: list[dict[str, Any]], trips: int) -> None:
    """The interleaved trips with their spread, their ratios to local; each backend's own medians."""
    figures: dict[str, dict[str, Any]] = {}
    for name, values in INTERLEAVED.items():
        figures[f"x=1+1 round trip: {name}"] = summary([v * 1000 for v in values], "ms")
    if mixed is not None:
        for name, ratio in mixed["round_trip_ratio_vs_local"].items():
            if name != "local":
                tier = name.removeprefix("sandbox (").removesuffix(")")
                figures[f"{tier} / local"] = single(ratio, "x")
                figures[f"{tier} / local, paired trips"] = single(
                    mixed["paired_trip_ratio_median"][name], "x"
                )
    labels = {
        "cold_start_to_first_result_ms": "cold start -> first result",
        "warm_acquire_to_first_result_ms": "warm acquire -> first result",
        "x_1_plus_1_round_trip_ms": "x=1+1 round trip, alone",
        "interrupt_latency_ms": "interrupt latency",
    }
    for row in results:  # measured one backend after another: medians only
        for key, label in labels.items():
            figures[f"{row['backend']}: {label}"] = median_only(row[key], "ms", None)
    emit(figures, settings={"trips": trips})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trips", type=int, default=50)
    parser.add_argument(
        "--backends",
        default="local,sandbox,landlock,provisioner,gateway",
        help="comma-separated; local always runs",
    )
    parser.add_argument(
        "--interleaved-only",
        action="store_true",
        help="only the interleaved round trips of local and the sandbox tiers (a short run)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.trips, args.backends.split(","), args.interleaved_only))
