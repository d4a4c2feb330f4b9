"""The benchmark suite: which benchmarks exist, running them, their results files and RESULTS.md.

Each benchmark is a script here (`bench_*.py`), run as a subprocess exactly as it is run alone; one
that reports to the suite prints a `BENCH-FIGURES` line (figures.py). Its runs are appended to
`results/<name>.json` with the machine, the commit and the date; RESULTS.md is generated from those
files (`render_results`), one section per benchmark with its latest run. Figures carried over from
the former hand-written RESULTS.md are runs marked `"source": "imported"`, with their own date and
machine as that file gave them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS_DIR = HERE / "results"
RESULTS_MD = HERE / "RESULTS.md"


@dataclass(frozen=True)
class Benchmark:
    name: str
    title: str
    argv: tuple[str, ...]  # after the interpreter: the script and the suite's arguments
    measures: str
    compares: str
    reports: bool = True  # prints a figures line, so the suite can run it
    in_suite: bool = True  # part of `python -m benchmarks` with no names (False: long or needs extras)
    chart: str | None = None

    @property
    def command(self) -> str:
        if self.argv and self.argv[0].endswith(".py"):
            return " ".join((".venv/bin/python", f"benchmarks/{self.argv[0]}", *self.argv[1:]))
        return " ".join(self.argv)


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "startup",
        "Start-up from the installed wheel",
        ("bench_startup.py", "--runs", "15"),
        "spawn -> `session/new` answered, the `continual-acp` console script of a wheel built from "
        "this tree and installed in a fresh venv, launched as an editor launches it (no arguments, "
        "a model configured in config.toml, product defaults): installed with bytecode (as pip "
        "does) and without (as uv does), launched with PYTHONDONTWRITEBYTECODE=1.",
        "the official ACP TypeScript SDK's echo agent on Node (`benchmarks/echo_agent.mjs`), in "
        "the same interleaved rounds; the ratio is ours / echo (target <= 0.3x).",
    ),
    Benchmark(
        "server",
        "ACP server over stdio",
        ("bench_server.py",),
        "spawn -> `initialize` and -> `session/new` from this checkout (bytecode compiled first), "
        "`session/list` round trip, 10 MB of cell output streamed (Zed's terminal view advertised), "
        "idle server memory with one session.",
        "the official Python SDK's echo agent (`acp.run_agent`), interleaved; ratio ours / echo.",
    ),
    Benchmark(
        "hostile_repo",
        "A hostile repository",
        ("bench_hostile_repo.py", "--runs", "5"),
        "a repository with 2,000 skills, a 60 MB SKILL.md, a FIFO, /dev/zero, a symlink loop and "
        "/proc/self/environ under `.continual-acp/skills/`: `session/new`, a prompt running one cell, "
        "a text prompt, and the worst event-loop stall `/kernel status` reports.",
        "an empty repository through the same server, interleaved.",
    ),
    Benchmark(
        "launch_seam",
        "The launch seam",
        ("bench_launch_seam.py", "--rounds", "20"),
        "git through `safe_git` and a program through `workspace_launch.run` (scrubbed env, group "
        "watch, capabilities dropped), wall and CPU of the children.",
        "the same commands spawned plainly, interleaved.",
    ),
    Benchmark(
        "referee",
        "Control-plane guard",
        ("bench_referee.py", "--runs", "500"),
        "the guard's per-cell check with 1,000 files under `.continual-acp/` (nothing changed; one "
        "rewritten entry restored) and the prompt-start refresh.",
        "the 3 ms per-cell target.",
    ),
    Benchmark(
        "control_plane",
        "Control plane by content",
        ("bench_control_plane.py", "--runs", "500"),
        "the per-cell quick check (nothing changed; an entry rewritten in place with its mtime set "
        "back), the whole tree by content.",
        "a plain stat walk and a read of every file, same tree, same run.",
    ),
    Benchmark(
        "kernel",
        "Kernel bridge",
        ("bench_kernel.py",),
        "warm acquire, `execute` round trip, stdout latency, interrupt, snapshot and restore of "
        "50 MB, host bridge call.",
        "a bare `AsyncKernelClient` on the same kernel command and transport; a cold start.",
    ),
    Benchmark(
        "agent",
        "Agent turn loop",
        ("bench_agent.py", "--turns", "40"),
        "the agent's own overhead per turn (wall minus endpoint and kernel time), cancel latency, "
        "session start, transcript append and load.",
        "the scripted endpoint's and kernel's own time, subtracted in the same run.",
    ),
    Benchmark(
        "harness",
        "Harness store",
        ("bench_harness.py",),
        "apply, lookup, rollback and the prompt overview at 1,000-100,000 entries and records.",
        "the same apply with 1,000 history records (interleaved) for the history-length ratio.",
    ),
    Benchmark(
        "refinement",
        "Refinement after each turn",
        ("bench_refinement.py", "--prompts", "20", "--settles", "50"),
        "prompt latency with auto-refine on every turn, and settle -> quiescence notification.",
        "the same prompts with auto-refine off (target ratio <= 1.05).",
    ),
    Benchmark(
        "panel",
        "Review panel",
        ("bench_panel.py", "--runs", "7"),
        "panel start over 10,000 records, first paint and first rows of the timeline and entries "
        "pages in headless chromium, an apply in another process -> shown on the open page.",
        "the 1 s targets.",
        in_suite=False,
    ),
    Benchmark(
        "backends",
        "Kernel backends",
        ("bench_backends.py", "--interleaved-only", "--trips", "200", "--backends", "local,sandbox,landlock"),
        "`x=1+1` round trip of the bubblewrap and Landlock sandboxes, all open at once, trips alternated.",
        "the local (unsandboxed) kernel in the same rounds (target <= 1.1x).",
    ),
    Benchmark(
        "mcp",
        "MCP tool calls",
        ("bench_mcp.py", "--calls", "400", "--rounds", "10", "--sessions", "20", "--spawns", "4"),
        "a tool call from a kernel cell through the host bridge to a stdio MCP server; `session/new` "
        "with 3 MCP servers.",
        "the bare MCP SDK client's `call_tool` to the same server (target +3 ms); `session/new` "
        "with none (target <= 1.1x).",
    ),
    Benchmark(
        "subagents",
        "Subagents",
        ("bench_subagents.py",),
        "spawn -> admitted, -> the child's first model request, -> its kernel ready; a parent "
        "cell's overhead of `agents.spawn`; memory per idle child.",
        "the 100 ms admission and 10 ms cell-overhead targets.",
    ),
    Benchmark(
        "trust",
        "Skill checks and project store",
        ("bench_trust.py", "--runs", "9"),
        "a skill check in a scratch kernel; an apply to a project store of 1,000 entry files.",
        "the same apply to the global store (target ratio <= 2x).",
    ),
    Benchmark(
        "autonomy",
        "Autonomous mode",
        ("bench_autonomy.py", "--quick"),
        "the workspace fingerprint at 10,000 files, the loop's own overhead per continuation, the "
        "tamper watch and the gate pin.",
        "the gate run bare through `run_gate` in the same run.",
    ),
    Benchmark(
        "scale",
        "Scale: sessions, transcripts, harness size",
        ("bench_scale.py",),
        "total RSS by open sessions with and without hibernation, revive latency, `session/list` and "
        "`session/load` by size, the harness prompt section and apply by size.",
        "a live kernel (revive), an empty harness through the same server (interleaved). The chart "
        "is redrawn only by `--write-results`, so it can be of an earlier run than the table.",
        in_suite=False,
        chart="scale.svg",
    ),
    Benchmark(
        "rewind",
        "Checkpoints and rewind",
        ("bench_rewind.py", "--rounds", "30"),
        "a per-prompt checkpoint of a kernel holding 50 MB a cell left alone; rewinds of a 50-prompt "
        "session through a real `Agent`.",
        "an empty internal cell and a full snapshot, interleaved.",
    ),
    Benchmark(
        "llama_cpp",
        "A real llama.cpp server",
        ("bench_llama_cpp.py",),
        "five turns per action format against llama-cpp-python's server with SmolLM2-135M: every "
        "turn must end with a valid stop reason and show something (a check, not a timing). Not run "
        "by the suite: it needs llama-cpp-python's server and the model's package installed, a turn "
        "may take minutes on a shared machine, and its result is a pass or fail per turn.",
        "nothing: pass or fail per turn.",
        reports=False,
        in_suite=False,
    ),
    Benchmark(
        "curator",
        "The curator's deterministic pass",
        ("bench_curator.py",),
        "the dry-run plan of `/curate` on a 10,000-entry harness (proposals to archive, join duplicates, demote, and "
        "the prompt tokens saved), and applying it as one history record.",
        "the target of 1 s for the plan.",
        in_suite=False,
    ),
    Benchmark(
        "suite_stalls",
        "The worst event-loop stall under the whole test suite",
        ("bench_suite_stalls.py",),
        "every server the test suite starts writes its worst event-loop stall at exit "
        "(CONTINUAL_ACP_STALL_REPORT); the median, 99th percentile and maximum over all of them, and "
        "the five worst with the server's own frame that blocked the loop.",
        "the 10 s stall threshold; a stall includes what the suite's load does to a server. "
        "Recorded from a CI run made with the variable set: `bench_suite_stalls.py --reports DIR`.",
        in_suite=False,
    ),
    Benchmark(
        "suite_time",
        "The test suite's time",
        ("bench_suite_time.py",),
        "pytest's wall time for the whole suite as `.ci/run` runs it (one worker more than cores, "
        "`--dist loadgroup`), the tests run, the seconds the workers spent in tests, and the five "
        "longest files.",
        "the budget of 10 minutes on 2 cores. Recorded from a fresh-clone `CI=true bash .ci/run "
        "--junitxml=REPORT.xml`: `bench_suite_time.py --junit REPORT.xml`.",
        in_suite=False,
    ),
    Benchmark(
        "eval",
        "Harness learning (`continual-acp eval`)",
        ("continual-acp", "eval", "--scripted", "--arms", "learning,frozen,seeded"),
        "tasks passed per session over 3 sessions of 8 bundled tasks; a pipeline test with a "
        "scripted model (it runs the informed cells when the lesson is in the prompt). Not run by "
        "the suite: a run takes minutes (8 tasks x 3 arms x 3 sessions) and its results are pass "
        "counts per session, which `continual-acp eval` reports itself.",
        "the frozen arm (no refinement) and the seeded arm (the lesson given up front).",
        reports=False,
        in_suite=False,
    ),
    Benchmark(
        "eval_local",
        "The eval's lessons suite on a local model",
        ("bench_eval_local.py",),
        "`continual-acp eval lessons` (two tasks: a lesson task and a nothing-to-learn control; arms "
        "learning and frozen; two sessions) against llama.cpp on one thread with Gemma 3 270M from its "
        "packages (SmolLM2-135M, the smaller packaged model, showed the floor): tokens per second, tasks "
        "passed, cells, entries shown and followed.",
        "nothing: a pipeline run. These models do not solve the tasks, so no lesson can raise a pass; "
        "run the same suite on your own hosted model to measure the harness.",
        in_suite=False,
    ),
)

BY_NAME = {b.name: b for b in BENCHMARKS}


# ---------------------------------------------------------------- running


def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or platform.machine()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def commit() -> str:
    """HEAD, with `-dirty` when tracked code differs from it (the results files themselves aside)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        return done.stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    changed = git(
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":!benchmarks/results",
        ":!benchmarks/RESULTS.md",
    )
    return head + ("-dirty" if changed else "")


def run(bench: Benchmark, extra: list[str] | None = None) -> dict[str, Any]:
    """Run one benchmark (its output passes through to stderr) and return its run record."""
    from figures import parse

    if not bench.reports:
        raise SystemExit(
            f"{bench.name}: prints no figures line yet; run it alone: {bench.command} "
            f"(its last recorded figures stay in results/{bench.name}.json)"
        )
    argv = [sys.executable, str(HERE / bench.argv[0]), *bench.argv[1:], *(extra or [])]
    before = machine()
    started = time.time()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    sys.stderr.write(done.stdout)
    if done.returncode != 0:
        raise SystemExit(f"{bench.name}: exited {done.returncode}")
    reported = parse(done.stdout)
    if reported is None:
        raise SystemExit(f"{bench.name}: printed no figures line")
    after = machine()
    record: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "commit": commit(),
        "source": "measured",
        "machine": {**before, "load": before["load"], "load_after": after["load"]},
        "seconds": round(time.time() - started, 1),
        "command": " ".join([bench.command, *(extra or [])]),
    }
    record.update(reported)
    return record


def results_path(name: str) -> Path:
    return RESULTS_DIR / f"{name}.json"


def load_runs(name: str) -> list[dict[str, Any]]:
    path = results_path(name)
    if not path.is_file():
        return []
    runs: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["runs"]
    return runs


def append_run(bench: Benchmark, record: dict[str, Any]) -> None:
    RESULTS_DIR.mkdir(exist_ok=True)
    runs = [*load_runs(bench.name), record]
    body = {"benchmark": bench.name, "runs": runs}
    results_path(bench.name).write_text(
        json.dumps(body, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


# ---------------------------------------------------------------- RESULTS.md


def _number(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _figure_row(name: str, figure: dict[str, Any]) -> str:
    unit = figure.get("unit", "")
    if "text" in figure:  # an imported figure that is not a number (a pass count, a verdict)
        return f"| {name} | {figure['text']} | | {figure.get('n') or ''} |"
    median = f"{_number(figure['median'])} {unit}".strip()
    if (figure.get("n") or 0) > 1 and "p10" in figure and "p90" in figure:
        spread = f"{_number(figure['p10'])}-{_number(figure['p90'])}"
    else:
        spread = ""
    n = figure.get("n")
    return f"| {name} | {median} | {spread} | {n if n else ''} |"


def _machine_line(run: dict[str, Any]) -> str:
    m = run.get("machine", {})
    parts = [f"{m.get('cores', '?')} cores {m.get('cpu', '?')}"]
    load = m.get("load")
    if isinstance(load, list) and load:
        after = m.get("load_after")
        parts.append(f"load {load[0]}" + (f" -> {after[0]}" if isinstance(after, list) and after else ""))
    elif isinstance(load, str):
        parts.append(f"load {load}")
    if m.get("python"):
        parts.append(f"Python {m['python']}")
    return ", ".join(parts)


def render_section(bench: Benchmark, runs: list[dict[str, Any]]) -> str:
    lines = [
        f"## {bench.title}",
        "",
        f"Command: `{bench.command}`"
        + ("" if bench.reports else " (prints its own table; not yet run by the suite)"),
        "",
    ]
    lines += [f"Measures: {bench.measures}", "", f"Compared against: {bench.compares}", ""]
    if not runs:
        return "\n".join([*lines, "No recorded run.", ""])
    latest = runs[-1]
    source = (
        "imported from the earlier hand-kept results"
        if latest.get("source") == "imported"
        else f"commit {latest.get('commit', '?')}"
    )
    lines.append(f"Latest run: {latest.get('date', '?')}, {source}; {_machine_line(latest)}.")
    if latest.get("command") and latest["command"] != bench.command:  # a quicker run, say so
        lines.append(f"Run as `{latest['command']}`.")
    lines.append(f"Runs recorded: {len(runs)} (`results/{bench.name}.json`).")
    lines.append("")
    if bench.chart:
        lines += [f"![{bench.title}]({bench.chart})", ""]
    lines += ["| figure | median | p10-p90 | n |", "| --- | --- | --- | --- |"]
    lines += [_figure_row(name, figure) for name, figure in latest.get("figures", {}).items()]
    ratios = latest.get("ratios_to_echo")
    if ratios:
        lines += [
            "",
            "Ours / the echo agent (medians): " + ", ".join(f"{k} **{v}x**" for k, v in ratios.items()) + ".",
        ]
    for note in latest.get("notes", []):
        lines += ["", note]
    lines.append("")
    return "\n".join(lines)


HEADER = """# Benchmark results

Generated by `python -m benchmarks` from `benchmarks/results/*.json` (do not edit by hand: run
`python -m benchmarks --render` after changing a results file). Each section is one benchmark: its
command, what it measures and against what, and its latest run; every run is kept in its JSON file
with the machine, the commit and the date. Medians, with p10-p90 (min-max below 10 samples) and the
number of samples. Ratios are measured within one run: the machines here are shared and noisy, so
only figures of the same run compare. `python -m benchmarks [names...]` runs the suite (or the named
benchmarks) and appends to the JSON.
"""


def render_results() -> str:
    sections = [render_section(bench, load_runs(bench.name)) for bench in BENCHMARKS]
    return HEADER + "\n" + "\n".join(sections)
