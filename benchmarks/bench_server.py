"""acp_server benchmark: start-up, request round trip, big cell output, idle memory.

    .venv/bin/python benchmarks/bench_server.py [--runs N] [--json PATH]

Measured in one run, beside the official Python SDK's echo agent (a minimal agent on `acp.run_agent`,
defined in this file and started as `bench_server.py --echo-agent`, because the SDK's examples are
not installed with the wheel):

* spawn -> `initialize` response, and spawn -> `session/new` response (medians over N fresh processes);
* round trip of `session/list` on an empty store (median over many sequential requests);
* 10 MB of cell output streamed to the client: every update arrives, the turn completes, and the
  server's RSS growth (peak during the cell minus RSS before it; the kernel is another process);
* idle server RSS with one session open (server process only).

The model is the scripted OpenAI-compatible endpoint on loopback, so nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from figures import emit, single, summary

OUR_SERVER = (sys.executable, "-m", "acp_server")
ECHO_AGENT = (sys.executable, str(Path(__file__).resolve()), "--echo-agent")
INIT_PARAMS = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False},
    "clientInfo": {"name": "bench", "version": "0"},
}
TEN_MB = 10 * 1024 * 1024
# 10 MiB in 1 KiB lines (1023 characters + newline), flushed every 64 KiB so it streams as ~160
# messages (unflushed, ipykernel would batch it into a few huge ones that the live view truncates).
BIG_CELL = (
    "import sys\nline = 'x' * 1023 + '\\n'\n"
    "for i in range(10 * 1024):\n"
    "    sys.stdout.write(line)\n"
    "    if i % 64 == 63:\n"
    "        sys.stdout.flush()\n"
)


# ---------------------------------------------------------------- the baseline: SDK echo agent


def run_echo_agent() -> None:
    """The smallest agent the official SDK supports: echoes each text block back, ends the turn."""
    import asyncio
    import uuid

    import acp
    from acp.schema import AgentCapabilities, Implementation

    class EchoAgent:
        def on_connect(self, conn: Any) -> None:
            self._conn = conn

        async def initialize(self, protocol_version: int, **_: Any) -> acp.InitializeResponse:
            return acp.InitializeResponse(
                protocol_version=protocol_version,
                agent_capabilities=AgentCapabilities(),
                agent_info=Implementation(name="echo", version="0"),
            )

        async def new_session(self, cwd: str, **_: Any) -> acp.NewSessionResponse:
            return acp.NewSessionResponse(session_id=uuid.uuid4().hex)

        async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> acp.PromptResponse:
            for block in prompt:
                await self._conn.session_update(session_id, acp.update_agent_message(block))
            return acp.PromptResponse(stop_reason="end_turn")

        async def cancel(self, session_id: str, **_: Any) -> None:
            return None

    asyncio.run(acp.run_agent(EchoAgent()))  # type: ignore[arg-type]


# ---------------------------------------------------------------- a synchronous stdio client


class Wire:
    """Blocking JSON-RPC over a child's pipes; reads on the calling thread so timings have no hand-off."""

    def __init__(
        self, argv: Sequence[str], env: dict[str, str], cwd: str, stderr: IO[bytes] | None = None
    ) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr if stderr is not None else subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self._id = 0
        self.updates = 0
        self.update_bytes = 0
        self.statuses: list[str] = []
        self.last_card_chars = 0

    def send(self, method: str, params: dict[str, Any]) -> int:
        self._id += 1
        assert self.proc.stdin is not None
        self.proc.stdin.write(
            (
                json.dumps({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}) + "\n"
            ).encode()
        )
        self.proc.stdin.flush()
        return self._id

    def wait(self, rid: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"agent closed stdout before answering request {rid}")
            msg = json.loads(line)
            if msg.get("method") == "session/update":
                self.updates += 1
                self.update_bytes += len(line)
                update = msg["params"]["update"]
                status = update.get("status")
                if status:
                    self.statuses.append(status)
                if status in ("completed", "failed"):
                    self.last_card_chars = card_output_chars(update)
                continue
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"request {rid} failed: {msg['error']}")
                result: dict[str, Any] = msg["result"]
                return result

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.wait(self.send(method, params))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_OMITTED = re.compile(r"\n\[\.\.\. (\d+) characters omitted \.\.\.\]\n")


def card_output_chars(update: dict[str, Any]) -> int:
    """Characters of cell output the final card accounts for: shown head + tail + the omitted count.

    Equal to what the cell printed when no output was lost on the way (the card keeps head and tail).
    """
    texts = [b["content"]["text"] for b in update.get("content") or [] if b.get("type") == "content"]
    texts = [t for t in texts if t.startswith("```") and not t.startswith("```python")]
    if not texts:
        return 0
    body = texts[0].split("\n", 1)[1].rsplit("\n", 1)[0]  # strip the fence lines
    match = _OMITTED.search(body)
    if match is None:
        return len(body) + 1  # the card drops the final newline
    return len(body) - len(match.group(0)) + int(match.group(1)) + 1


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


# ---------------------------------------------------------------- measurements


def compile_our_packages() -> str:
    """Write our packages' bytecode first, as installing a wheel does: with PYTHONDONTWRITEBYTECODE
    set (this machine sets it) an editable checkout would otherwise be compiled from source at every
    spawn, while the SDK's installed files have theirs (an unfair ~100+ ms against us)."""
    root = Path(__file__).resolve().parent.parent
    packages = [
        str(root / name)
        for name in ("acp_server", "agent_core", "harness_store", "host_base", "kernel_bridge", "skills")
    ]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *packages], check=True, stdout=subprocess.DEVNULL
    )
    return "compiled before the run (compileall)"


def startup(argv: Sequence[str], env: dict[str, str], runs: int, *, with_session: bool) -> list[float]:
    """Seconds from spawn to the `initialize` (or `session/new`) response, one fresh process per run."""
    times = []
    for i in range(runs):
        with tempfile.TemporaryDirectory() as scratch:
            run_env = {**env, "CONTINUAL_ACP_HOME": str(Path(scratch) / f"home{i}")}
            wire = Wire(argv, run_env, scratch)
            try:
                init = wire.send("initialize", INIT_PARAMS)
                if with_session:
                    wire.wait(init)
                    wire.call("session/new", {"cwd": scratch, "mcpServers": []})
                else:
                    wire.wait(init)
                times.append(time.perf_counter() - wire.started)
            finally:
                wire.close()
    return times


def list_round_trip(env: dict[str, str], count: int) -> list[float]:
    with tempfile.TemporaryDirectory() as scratch:
        wire = Wire(OUR_SERVER, {**env, "CONTINUAL_ACP_HOME": str(Path(scratch) / "home")}, scratch)
        try:
            wire.call("initialize", INIT_PARAMS)
            for _ in range(50):  # warm-up: first calls import and build what later ones reuse
                wire.call("session/list", {})
            times = []
            for _ in range(count):
                t0 = time.perf_counter()
                wire.call("session/list", {})
                times.append(time.perf_counter() - t0)
            return times
        finally:
            wire.close()


def big_output_and_idle_rss(env: dict[str, str]) -> dict[str, Any]:
    from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

    script = [tool_call(BIG_CELL, title="Print 10 MB"), text("printed")]
    with tempfile.TemporaryDirectory() as scratch, ScriptedModelServer(script, fallback=text("ok")) as model:
        run_env = {
            **env,
            "CONTINUAL_ACP_HOME": str(Path(scratch) / "home"),
            "OPENAI_BASE_URL": model.base_url,
        }
        wire = Wire(OUR_SERVER, run_env, scratch)
        try:
            # Advertise Zed's terminal view too: the heaviest way a client can ask for cell output.
            init = {
                **INIT_PARAMS,
                "clientCapabilities": {
                    **INIT_PARAMS["clientCapabilities"],
                    "_meta": {"terminal_output": True},
                },
            }
            wire.call("initialize", init)
            sid = wire.call("session/new", {"cwd": scratch, "mcpServers": []})["sessionId"]
            # Idle RSS: one session, its kernel started (the status command waits for it), nothing running.
            wire.call(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/kernel status"}]}
            )
            idle = rss_kib(wire.proc.pid)
            wire.updates = wire.update_bytes = 0
            wire.statuses.clear()
            t0 = time.perf_counter()
            stop = wire.call(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "print 10 MB"}]}
            )
            elapsed = time.perf_counter() - t0
            peak = rss_kib(wire.proc.pid, "VmHWM")
            return {
                "chars_accounted": wire.last_card_chars,
                "idle_rss_mib": idle / 1024,
                "stop_reason": stop["stopReason"],
                "cell_status": next(
                    (s for s in reversed(wire.statuses) if s in ("completed", "failed")), None
                ),
                "updates": wire.updates,
                "update_mib": wire.update_bytes / 2**20,
                "seconds": elapsed,
                "rss_growth_mib": max(0, peak - idle) / 1024,
                "model_requests": len(model.requests),
            }
        finally:
            wire.close()


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--echo-agent", action="store_true", help="run the SDK echo agent (used by the benchmark)"
    )
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per start-up figure")
    parser.add_argument("--round-trips", type=int, default=2000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--startup-only", action="store_true", help="only the interleaved start-up figures (a short run)"
    )
    args = parser.parse_args(argv)
    if args.echo_agent:
        run_echo_agent()
        return 0

    compiled = compile_our_packages()
    env = dict(os.environ)
    env.update(
        OPENAI_API_KEY="bench", OPENAI_BASE_URL="http://127.0.0.1:9/v1", CONTINUAL_ACP_MODEL="scripted-model"
    )
    env["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="bench-config-")
    figures: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "nproc": os.cpu_count(),
        "cpu": next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "?",
        ),
        "load_avg_1m": os.getloadavg()[0],
        "bytecode": compiled,
    }
    # Interleave ours and the baseline so machine load hits both alike.
    ours_init, echo_init, ours_new, echo_new = [], [], [], []
    for _ in range(args.runs):
        ours_init += startup(OUR_SERVER, env, 1, with_session=False)
        echo_init += startup(ECHO_AGENT, env, 1, with_session=False)
        ours_new += startup(OUR_SERVER, env, 1, with_session=True)
        echo_new += startup(ECHO_AGENT, env, 1, with_session=True)
    figures["spawn_to_initialize_ms"] = {"ours": median_ms(ours_init), "sdk_echo": median_ms(echo_init)}
    figures["spawn_to_session_new_ms"] = {"ours": median_ms(ours_new), "sdk_echo": median_ms(echo_new)}
    suite_figures = {
        "spawn -> initialize: ours (checkout)": summary([t * 1000 for t in ours_init], "ms"),
        "spawn -> initialize: Python SDK echo agent": summary([t * 1000 for t in echo_init], "ms"),
        "spawn -> session/new: ours (checkout)": summary([t * 1000 for t in ours_new], "ms"),
        "spawn -> session/new: Python SDK echo agent": summary([t * 1000 for t in echo_new], "ms"),
    }
    ratios = {
        "spawn -> initialize": round(median_ms(ours_init) / median_ms(echo_init), 3),
        "spawn -> session/new": round(median_ms(ours_new) / median_ms(echo_new), 3),
    }
    if args.startup_only:
        init, new = figures["spawn_to_initialize_ms"], figures["spawn_to_session_new_ms"]
        print(
            f"machine: {figures['nproc']} cores, {figures['cpu']}, load {figures['load_avg_1m']:.2f} -> "
            f"{os.getloadavg()[0]:.2f}, {figures['date']}, bytecode {compiled}"
        )
        for label, pair in (("initialize ", init), ("session/new", new)):
            print(
                f"spawn -> {label}: ours {pair['ours']:7.1f} ms   SDK echo {pair['sdk_echo']:7.1f} ms   "
                f"ours/echo {pair['ours'] / pair['sdk_echo']:.2f}"
            )
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))
        emit(suite_figures, ratios_to_echo=ratios, settings={"runs": args.runs, "startup_only": True})
        return 0
    trips = list_round_trip(env, args.round_trips)
    figures["session_list_round_trip_us"] = {
        "median": statistics.median(trips) * 1e6,
        "p90": statistics.quantiles(trips, n=10)[-1] * 1e6,
    }
    figures["ten_mb_cell"] = big_output_and_idle_rss(env)

    init, new = figures["spawn_to_initialize_ms"], figures["spawn_to_session_new_ms"]
    big = figures["ten_mb_cell"]
    print(
        f"machine: {figures['nproc']} cores, {figures['cpu']}, load {figures['load_avg_1m']:.2f}, {figures['date']}"
    )
    print(
        f"spawn -> initialize  : ours {init['ours']:7.1f} ms   SDK echo {init['sdk_echo']:7.1f} ms   ratio {init['sdk_echo'] / init['ours']:.2f}x"
    )
    print(
        f"spawn -> session/new : ours {new['ours']:7.1f} ms   SDK echo {new['sdk_echo']:7.1f} ms   ratio {new['sdk_echo'] / new['ours']:.2f}x"
    )
    rt = figures["session_list_round_trip_us"]
    print(f"session/list round trip (empty store): median {rt['median']:.0f} us, p90 {rt['p90']:.0f} us")
    print(
        f"10 MB cell output: {big['updates']} updates ({big['update_mib']:.1f} MiB on the wire), cell {big['cell_status']}, "
        f"stop {big['stop_reason']}, {big['seconds']:.1f} s, server RSS growth {big['rss_growth_mib']:.1f} MiB; "
        f"card accounts for {big['chars_accounted']} of {TEN_MB} characters printed"
    )
    print(f"idle server RSS with one session (kernel excluded): {big['idle_rss_mib']:.1f} MiB")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    suite_figures["session/list round trip, empty store"] = summary([t * 1e6 for t in trips], "us")
    suite_figures["10 MB cell: seconds to the end of the turn"] = single(big["seconds"], "s")
    suite_figures["10 MB cell: server RSS growth"] = single(big["rss_growth_mib"], "MiB")
    suite_figures["10 MB cell: characters the final card accounts for"] = single(
        big["chars_accounted"], "chars"
    )
    suite_figures["idle server RSS, one session"] = single(big["idle_rss_mib"], "MiB")
    emit(suite_figures, ratios_to_echo=ratios, settings={"runs": args.runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
