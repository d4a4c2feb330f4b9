"""MCP benchmarks: medians measured side by side in one run.

* a tool call from a cell (`await mcp.call(...)` timed inside the kernel) to a local stdio MCP server
  and back, against the bare SDK client's own `call_tool` round trip to the same server script
  (interleaved rounds in one process);
* `session/new` over real stdio with 3 stdio MCP servers configured vs none (same process, after a
  first session has paid the imports; alternated), and spawn -> `session/new` (fresh processes);
* the part of `session/new` that is MCP work before it answers (parse `mcpServers`, attach a registry
  that starts the servers only after the response), in process, none vs 3 servers.

Run: .venv/bin/python benchmarks/bench_mcp.py [--calls 200] [--rounds 10] [--sessions 10] [--spawns 3]
Ends with the figures line the suite reads (`python -m benchmarks mcp`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_server import INIT_PARAMS, Wire
from figures import emit, single, summary

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(ROOT / "tests" / "mcp" / "servers" / "tools_server.py")


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def in_ms(values: list[float]) -> dict[str, Any]:
    return summary([v * 1000 for v in values], "ms")


async def tool_calls(rounds: int, per_round: int, work: Path) -> dict[str, list[float]]:
    """Interleaved in one process: the bare SDK client's `call_tool` round trip to the server script,
    and `await mcp.call(...)` timed inside a kernel cell (registry -> its own server process)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from agent_core.mcp import McpRegistry, StdioServer, host_ops
    from kernel_bridge import KernelPool
    from skills.loader import setup_code

    registry = McpRegistry(cwd=str(work))
    registry.configure([StdioServer("bench", sys.executable, (SERVER,))])
    pool = KernelPool(0)
    await pool.start()
    kernel = await pool.acquire(cwd=work, setup_code=setup_code([]))
    host_ops.register(kernel.host_bridge, registry)
    cell = (
        "import json, time\n_t = []\n"
        f"for _i in range({per_round}):\n"
        "    _s = time.perf_counter(); await mcp.call('bench', 'add', a=_i, b=1)\n"
        "    _t.append(time.perf_counter() - _s)\n"
        "print(json.dumps(_t))"
    )
    out: dict[str, list[float]] = {"bare": [], "cell": [], "cell_whole": [], "cell_empty": []}
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    try:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("add", {"a": 0, "b": 0})
            warm = await kernel.execute("await mcp.call('bench', 'add', a=0, b=0)", timeout=120).result()
            assert warm.status == "ok", warm.output
            for _ in range(rounds):
                for i in range(per_round):
                    start = time.perf_counter()
                    await session.call_tool("add", {"a": i, "b": 1})
                    out["bare"].append(time.perf_counter() - start)
                result = await kernel.execute(cell, timeout=300).result()
                assert result.status == "ok", result.output
                out["cell"].extend(json.loads(result.output))
                start = time.perf_counter()
                await kernel.execute("await mcp.call('bench', 'add', a=1, b=1)").result()
                out["cell_whole"].append(time.perf_counter() - start)
                start = time.perf_counter()
                await kernel.execute("1").result()
                out["cell_empty"].append(time.perf_counter() - start)
    finally:
        await kernel.shutdown(final_snapshot=False)
        await pool.aclose()
        await registry.aclose()
    return out


def server_entries(count: int) -> list[dict[str, Any]]:
    return [{"name": f"s{i}", "command": sys.executable, "args": [SERVER], "env": []} for i in range(count)]


def server_env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CONTINUAL_ACP_HOME": str(home),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "xdg"),
        # A model configured (session/new refuses without one) that no measurement here calls.
        "CONTINUAL_ACP_MODEL": "scripted-model",
        "OPENAI_API_KEY": "bench",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }


def session_new_same_process(rounds: int) -> tuple[list[float], list[float]]:
    argv = [sys.executable, "-m", "acp_server"]
    none: list[float] = []
    three: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        wire = Wire(argv, server_env(Path(scratch) / "home"), scratch)
        try:
            wire.call("initialize", INIT_PARAMS)
            first = wire.call("session/new", {"cwd": scratch, "mcpServers": []})  # pays the imports
            wire.call("session/close", {"sessionId": first["sessionId"]})
            for index in range(rounds):
                # The order flips every round (runs A-I kept none first; see RESULTS.md).
                order = ((0, none), (3, three)) if index % 2 else ((3, three), (0, none))
                for servers, sink in order:
                    start = time.perf_counter()
                    sid = wire.call("session/new", {"cwd": scratch, "mcpServers": server_entries(servers)})
                    sink.append(time.perf_counter() - start)
                    time.sleep(1.5)  # let the servers connect, so the next measurement starts quiet
                    wire.call("session/close", {"sessionId": sid["sessionId"]})
                    time.sleep(1.0)  # and the kernel/servers shutdown settle
        finally:
            wire.close()
    return none, three


def spawn_to_session_new(runs: int) -> tuple[list[float], list[float]]:
    """Fresh process per run, alternating no servers / 3 servers (the order flips every round)."""
    argv = [sys.executable, "-m", "acp_server"]
    times: dict[int, list[float]] = {0: [], 3: []}
    for index in range(runs):
        for servers in (0, 3) if index % 2 else (3, 0):
            with tempfile.TemporaryDirectory() as scratch:
                wire = Wire(argv, server_env(Path(scratch) / "home"), scratch)
                try:
                    wire.call("initialize", INIT_PARAMS)
                    wire.call("session/new", {"cwd": scratch, "mcpServers": server_entries(servers)})
                    times[servers].append(time.perf_counter() - wire.started)
                finally:
                    wire.close()
    return times[0], times[3]


def session_mcp_setup_in_process(rounds: int) -> tuple[list[float], list[float]]:
    """What `session/new` itself does for its `mcpServers` before answering: parse them and attach a
    registry that has not started them (the servers start after the response). Alternated, in process."""
    from types import SimpleNamespace

    from agent_core.bus import EventBus
    from agent_core.config.loader import AgentConfig
    from agent_core.mcp import attach_mcp, parse_servers

    config = AgentConfig(home=Path(tempfile.gettempdir()))
    times: dict[int, list[float]] = {0: [], 3: []}
    for _ in range(rounds):
        for servers in (0, 3):
            entries = server_entries(servers)
            session = SimpleNamespace(cwd="/tmp", agent_config=config, bus=EventBus())
            start = time.perf_counter()
            attach_mcp(session, parse_servers(entries), start=False)
            times[servers].append(time.perf_counter() - start)
    return times[0], times[3]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--spawns", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}, nproc {os.cpu_count()}")
    with tempfile.TemporaryDirectory() as work:
        calls = asyncio.run(tool_calls(args.rounds, args.calls // args.rounds, Path(work)))
    bare, inside = calls["bare"], calls["cell"]
    print(f"tool call, bare SDK client round trip : median {ms(bare):.3f} ms ({len(bare)} calls)")
    print(f"tool call, await mcp.call in a cell   : median {ms(inside):.3f} ms ({len(inside)} calls)")
    print(f"  overhead of the kernel path          : {ms(inside) - ms(bare):+.3f} ms")
    whole, empty = calls["cell_whole"], calls["cell_empty"]
    print(f"whole cell with one call / empty cell : {ms(whole):.1f} ms / {ms(empty):.1f} ms")
    none, three = session_new_same_process(args.sessions)
    print(f"session/new, no MCP servers           : median {ms(none):.1f} ms")
    print(
        f"session/new, 3 stdio MCP servers      : median {ms(three):.1f} ms  ratio {ms(three) / ms(none):.2f}x"
    )
    cold_none, cold_three = spawn_to_session_new(args.spawns)
    print(
        f"spawn -> session/new, none / 3 servers: {ms(cold_none):.0f} ms / {ms(cold_three):.0f} ms"
        f"  ratio {ms(cold_three) / ms(cold_none):.2f}x"
    )
    setup_none, setup_three = session_mcp_setup_in_process(2000)
    print(
        f"session/new's own MCP work (parse + attach, in process), none / 3 servers: "
        f"{ms(setup_none) * 1000:.0f} us / {ms(setup_three) * 1000:.0f} us"
    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    figures = {
        "tool call, bare SDK client": in_ms(bare),
        "tool call from a kernel cell": in_ms(inside),
        "overhead of the cell path": single(round(ms(inside) - ms(bare), 4), "ms"),
        "whole cell with one call": in_ms(whole),
        "empty cell": in_ms(empty),
        "session/new, no MCP server": in_ms(none),
        "session/new, 3 MCP servers": in_ms(three),
        "session/new, 3 servers / none": single(round(ms(three) / ms(none), 3), "x"),
        "spawn -> session/new, none": in_ms(cold_none),
        "spawn -> session/new, 3 servers": in_ms(cold_three),
        "spawn -> session/new, 3 servers / none": single(round(ms(cold_three) / ms(cold_none), 3), "x"),
        "session/new's own MCP work, none": summary([v * 1e6 for v in setup_none], "us"),
        "session/new's own MCP work, 3 servers": summary([v * 1e6 for v in setup_three], "us"),
    }
    emit(figures, settings=vars(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
