"""Refinement benchmark: is refinement off the critical path, and how fast is settling announced?

    .venv/bin/python benchmarks/bench_refinement.py [--prompts N] [--settles N] [--json PATH]

Measured in one run:

1. **Prompt latency, auto-refine on vs off** (real server over real stdio, scripted model on loopback):
   the median time from sending `session/prompt` to its response (the scripted answer takes
   200 ms), with automatic refinement after every turn (a scripted review + plan that take 500 ms
   together and apply one memory) and with it off. Between prompts the client waits for `_harness/await_quiescence`, so each prompt starts from
   a settled session. Target: on/off <= 1.05.
2. **Settle -> notification**, two ways:
   * in process: from the store's apply returning (the commit) to a harness surface subscriber
     receiving the quiescent transition (what the server writes as `_harness/quiescence`);
   * over stdio (an upper bound): from the refinement record's `created_at` (stamped before the
     apply even writes) to the client reading the `_harness/quiescence` notification.
   Target: <= 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from figures import emit, single, summary

from agent_core.testing.scripted_model import ScriptedModelServer, response

REVIEW_SECONDS = 0.25
PLAN_SECONDS = 0.25
# The scripted answer to each prompt takes this long, like a (fast) real model; an instant answer
# would make the ratio a measure of scheduler noise on a few milliseconds.
ANSWER_SECONDS = 0.2


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


class StdioClient:
    """A minimal synchronous ACP client that timestamps every line it reads."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "acp_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **env},
            cwd=cwd,
        )
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self._cond = threading.Condition()
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            stamp = time.time()
            message = json.loads(raw)
            with self._cond:
                self.lines.append((stamp, message))
                self._cond.notify_all()
            if message.get("method") == "session/request_permission":
                self._send(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "apply"}},
                    }
                )

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(
        self, method: str, params: dict[str, Any], timeout: float = 120.0
    ) -> tuple[float, float, Any]:
        """(sent at, answered at, result)."""
        self._next += 1
        request_id = self._next
        sent = time.time()
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        with self._cond:
            ok = self._cond.wait_for(
                lambda: any(m.get("id") == request_id and "method" not in m for _, m in self.lines), timeout
            )
            if not ok:
                raise TimeoutError(f"{method} did not answer within {timeout} s")
            stamp, message = next(
                (s, m) for s, m in self.lines if m.get("id") == request_id and "method" not in m
            )
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return sent, stamp, message["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


def _config_home(base: Path, auto: bool) -> dict[str, str]:
    home = base / ("home-on" if auto else "home-off")
    config = home / "xdg" / "continual-acp"
    config.mkdir(parents=True)
    every = 1 if auto else 0
    (config / "config.toml").write_text(f"auto_refine_every = {every}\nrefine_cooldown_seconds = 0\n")
    return {
        "CONTINUAL_ACP_HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "xdg"),
        "HOME": str(home),
        "CONTINUAL_ACP_MODEL": "scripted-model",
        "OPENAI_API_KEY": "k",
        "CONTINUAL_ACP_KERNEL_POOL": "0",
    }


def _plan(i: int) -> str:
    edit = {
        "action": "create",
        "kind": "memory",
        "id": f"fact_{i}",
        "title": f"Fact {i}",
        "content": f"Benchmark fact number {i} about a distinct topic {i * 7919}.",
    }
    return json.dumps(
        {"summary": f"Remember fact {i}", "rationale": "bench", "expected_outcome": "x", "edits": [edit]}
    )


def run_prompts(base: Path, prompts: int, *, auto: bool) -> dict[str, Any]:
    with ScriptedModelServer() as model:
        env = _config_home(base, auto) | {"OPENAI_BASE_URL": model.base_url}
        work = base / ("work-on" if auto else "work-off")
        work.mkdir()
        client = StdioClient(env, str(work))
        try:
            client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            sid = client.request("session/new", {"cwd": str(work), "mcpServers": []})[2]["sessionId"]
            latencies: list[float] = []
            settle_upper: list[float] = []
            for i in range(prompts + 1):  # the first prompt warms imports and the endpoint; not counted
                model.push(response([{"sleep": ANSWER_SECONDS}, {"content": f"Answer {i}."}]))
                if auto:
                    model.push(
                        response(
                            [
                                {"sleep": REVIEW_SECONDS},
                                {"content": '{"should_refine": true, "rationale": "bench"}'},
                            ]
                        ),
                        response([{"sleep": PLAN_SECONDS}, {"content": _plan(i)}]),
                    )
                sent, answered, _ = client.request(
                    "session/prompt",
                    {"sessionId": sid, "prompt": [{"type": "text", "text": f"question {i}"}]},
                )
                _, _, settled = client.request(
                    "_harness/await_quiescence", {"sessionId": sid, "timeoutMs": 60_000}
                )
                if i == 0:
                    continue
                latencies.append(answered - sent)
                if auto and settled.get("lastRefinementId"):
                    shown = client.request(
                        "_harness/show", {"sessionId": sid, "refinementId": settled["lastRefinementId"]}
                    )[2]
                    created = datetime.fromisoformat(shown["createdAt"].replace("Z", "+00:00")).timestamp()
                    notified = [
                        s
                        for s, m in client.lines
                        if m.get("method") == "_harness/quiescence"
                        and m["params"].get("quiescent")
                        and m["params"].get("lastRefinementId") == settled["lastRefinementId"]
                    ]
                    if notified:
                        settle_upper.append(notified[0] - created)
        finally:
            client.close()
    return {"latencies": latencies, "settle_upper": settle_upper}


async def settle_in_process(base: Path, runs: int) -> list[float]:
    """Store commit -> a subscriber of the harness surface receives the quiescent transition, with
    the real coordinator serving."""
    import anyio

    from agent_core.refinement import HarnessSurface, QuiescenceChanged, RefinementCoordinator
    from harness_store import HarnessStore, Proposal

    local = HarnessStore(base / "inproc" / "sessions" / "s" / "harness")
    glob = HarnessStore(base / "inproc" / "harness")
    committed: list[float] = []
    original = local.apply

    def timed_apply(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        committed.append(time.perf_counter())
        return result

    local.apply = timed_apply  # type: ignore[method-assign]
    coordinator = RefinementCoordinator(
        session_id="s", local_store=local, global_store=glob, planner=None, trajectory=list, auto_every=0
    )
    notified: list[float] = []

    async def listener(event: object) -> None:
        if isinstance(event, QuiescenceChanged) and event.quiescent:
            notified.append(time.perf_counter())

    surface = HarnessSurface.of(coordinator)
    surface.subscribe(listener)
    samples: list[float] = []
    async with anyio.create_task_group() as tg:
        await tg.start(coordinator.serve)
        for i in range(runs):
            proposal = Proposal.model_validate(json.loads(_plan(i)))
            async with coordinator.jobs.busy():  # what a worker job does around its apply
                await surface.write(proposal, scope="local")
            await surface.wait_quiescent(10)
            samples.append(notified[-1] - committed[-1])
        tg.cancel_scope.cancel()
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=15)
    parser.add_argument("--settles", type=int, default=40)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-refinement-") as tmp:
        base = Path(tmp)
        off = run_prompts(base, args.prompts, auto=False)
        on = run_prompts(base, args.prompts, auto=True)
        inproc = asyncio.run(settle_in_process(base, args.settles))
    med_off = statistics.median(off["latencies"])
    med_on = statistics.median(on["latencies"])
    figures = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "prompts_per_mode": args.prompts,
        "prompt_latency_ms_auto_off": round(med_off * 1000, 1),
        "prompt_latency_ms_auto_on": round(med_on * 1000, 1),
        "ratio_on_off": round(med_on / med_off, 3),
        "scripted_review_plus_plan_ms": int((REVIEW_SECONDS + PLAN_SECONDS) * 1000),
        "settle_to_notification_ms_in_process_median": round(statistics.median(inproc) * 1000, 3),
        "settle_to_notification_ms_in_process_max": round(max(inproc) * 1000, 3),
        "settle_to_notification_ms_stdio_upper_bound_median": round(
            statistics.median(on["settle_upper"]) * 1000, 1
        )
        if on["settle_upper"]
        else None,
        "settle_to_notification_ms_stdio_upper_bound_max": round(max(on["settle_upper"]) * 1000, 1)
        if on["settle_upper"]
        else None,
    }
    for key, value in figures.items():
        print(f"{key}: {value}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    suite = {
        "prompt latency, auto-refine off": summary([t * 1000 for t in off["latencies"]], "ms"),
        "prompt latency, auto-refine on every turn": summary([t * 1000 for t in on["latencies"]], "ms"),
        "ratio on / off (medians)": single(med_on / med_off, "x"),
        "settle -> quiescence notification, in process": summary([t * 1000 for t in inproc], "ms"),
    }
    if on["settle_upper"]:
        suite["settle -> _harness/quiescence read over stdio (upper bound)"] = summary(
            [t * 1000 for t in on["settle_upper"]], "ms"
        )
    emit(suite, settings={"prompts": args.prompts, "settles": args.settles})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
