"""How the cost grows with the work: open sessions, long transcripts, many sessions, a big harness.

    .venv/bin/python benchmarks/bench_scale.py [--sessions 1,10,50,100] [--live-max 50] [--quick]
                                               [--write-results]

Measured in one run, through the real server over stdio (the scripted model on loopback):

* total memory (RSS of the server and every process under it, summed: kernels, warm kernels) with
  N open sessions, each having run one cell that leaves ~4 MB of variables; with hibernation
  (`max_kernels` = 4: past it the coldest kernel hibernates) and without (`kernel_idle_minutes` = 0,
  no cap: every kernel stays live). Without hibernation only up to `--live-max` sessions are run
  (each live kernel is ~60-90 MB; the 100-session figure is extrapolated from the largest point
  measured, and marked so);
* revive latency: `session/prompt` sent -> the cell's `completed` update, for a session whose
  kernel hibernated (idle past `kernel_idle_minutes` = 0.02, warm pool on), beside the same for a
  live kernel (interleaved);
* `session/list` round trip by number of sessions, `session/load` (replay + kernel restore) by
  transcript length;
* harness prompt section (`render_overview` with a query) and a 5-edit apply by harness size
  (in-process, harness_store).

`--write-results` redraws the chart RESULTS.md shows (SVG, continual_eval.chart): benchmarks/scale.svg.
Ends with the figures line the suite reads (`python -m benchmarks scale`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # continual_eval (the chart) from this checkout

from bench_server import INIT_PARAMS, OUR_SERVER, Wire, compile_our_packages, rss_kib  # noqa: E402
from figures import emit, single, summary  # noqa: E402

if TYPE_CHECKING:
    from harness_store import HarnessState as HarnessStateT

# ~4 MB of ordinary variables: a bytes blob, a list of floats, a dict of strings.
MAKE_VARS = (
    "blob = bytes(2_000_000)\n"
    "values = [i * 0.5 for i in range(100_000)]\n"
    "names = {f'k{i}': 'v' * 20 for i in range(10_000)}\n"
    "print(len(blob), len(values), len(names))"
)
HIBERNATION_CAP = 4


# ---------------------------------------------------------------- processes


def descendants(pid: int) -> list[int]:
    """Every process under `pid` (kernels lead their own process group but stay its children)."""
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def total_rss_mib(pid: int) -> tuple[float, int]:
    """RSS of `pid` and all its descendants, summed (MiB), and how many kernels are among them."""
    total, kernels = 0, 0
    for each in [pid, *descendants(pid)]:
        try:
            total += rss_kib(each)
            if each != pid and "ipykernel" in Path(f"/proc/{each}/cmdline").read_text(errors="replace"):
                kernels += 1
        except (OSError, RuntimeError):
            continue
    return total / 1024, kernels


# ---------------------------------------------------------------- the wire


def prompt(wire: Wire, sid: str, text: str) -> tuple[float | None, dict[str, Any]]:
    """Send a prompt; seconds from sending to the first cell's `completed` update, and the result."""
    assert wire.proc.stdout is not None
    sent = time.perf_counter()
    rid = wire.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    done: float | None = None
    while True:
        line = wire.proc.stdout.readline()
        if not line:
            raise RuntimeError("the server closed stdout")
        msg = json.loads(line)
        if msg.get("method") == "session/update":
            if done is None and msg["params"]["update"].get("status") == "completed":
                done = time.perf_counter() - sent
            continue
        if msg.get("id") == rid and "method" not in msg:
            if "error" in msg:
                raise RuntimeError(f"prompt failed: {msg['error']}")
            return done, msg["result"]


def command(wire: Wire, sid: str, text: str) -> str:
    """A slash command's reply text (the agent message chunks it streams)."""
    assert wire.proc.stdout is not None
    rid = wire.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    chunks = []
    while True:
        msg = json.loads(wire.proc.stdout.readline())
        if msg.get("method") == "session/update":
            update = msg["params"]["update"]
            if update.get("sessionUpdate") == "agent_message_chunk":
                chunks.append(update.get("content", {}).get("text", ""))
            continue
        if msg.get("id") == rid and "method" not in msg:
            return "".join(chunks)


def server(env: dict[str, str], scratch: str, **settings: str) -> Wire:
    wire = Wire(OUR_SERVER, {**env, **settings}, scratch)
    wire.call("initialize", INIT_PARAMS)
    return wire


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


# ---------------------------------------------------------------- measurements


def memory_point(env: dict[str, str], sessions: int, hibernate: bool) -> dict[str, Any]:
    from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

    script = [step for _ in range(sessions) for step in (tool_call(MAKE_VARS), text("made"))]
    with tempfile.TemporaryDirectory() as scratch, ScriptedModelServer(script, fallback=text("ok")) as model:
        settings = {"CONTINUAL_ACP_HOME": f"{scratch}/home", "OPENAI_BASE_URL": model.base_url}
        if hibernate:
            settings["CONTINUAL_ACP_MAX_KERNELS"] = str(HIBERNATION_CAP)
        else:
            settings["CONTINUAL_ACP_KERNEL_IDLE_MINUTES"] = "0"
        wire = server(env, scratch, **settings)
        started = time.perf_counter()
        try:
            for _ in range(sessions):
                sid = wire.call("session/new", {"cwd": scratch, "mcpServers": []})["sessionId"]
                _, result = prompt(wire, sid, "make some variables")
                assert result["stopReason"] == "end_turn", result
            command(wire, sid, "/kernel status")  # the last session's kernel is up
            rss, kernels = total_rss_mib(wire.proc.pid)
            server_rss = rss_kib(wire.proc.pid) / 1024
            return {
                "sessions": sessions,
                "hibernation": hibernate,
                "total_rss_mib": rss,
                "server_rss_mib": server_rss,
                "kernels": kernels,
                "seconds": time.perf_counter() - started,
            }
        finally:
            wire.close()


def revive_latency(env: dict[str, str], samples: int) -> dict[str, Any]:
    """Hibernated vs live: prompt sent -> its cell completed (interleaved)."""
    from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

    read = "print(len(blob) + len(values) + len(names))"
    script = [tool_call(MAKE_VARS), text("made")] * 2
    script += [
        step for _ in range(samples) for step in (tool_call(read), text("ok"), tool_call(read), text("ok"))
    ]
    with tempfile.TemporaryDirectory() as scratch, ScriptedModelServer(script, fallback=text("ok")) as model:
        wire = server(
            env,
            scratch,
            CONTINUAL_ACP_HOME=f"{scratch}/home",
            OPENAI_BASE_URL=model.base_url,
            CONTINUAL_ACP_KERNEL_IDLE_MINUTES="0.02",  # 1.2 s: hibernates at the next sweep (1 s)
        )
        try:
            sleeper = wire.call("session/new", {"cwd": scratch, "mcpServers": []})["sessionId"]
            prompt(wire, sleeper, "make")
            awake = wire.call("session/new", {"cwd": scratch, "mcpServers": []})["sessionId"]
            command(wire, awake, "/kernel keep")  # the live baseline never hibernates
            prompt(wire, awake, "make")
            revived, live, restored = [], [], []
            for _ in range(samples):
                wait_until(
                    lambda: command(wire, sleeper, "/kernel status").startswith("Kernel: hibernated"),
                    60,
                    "the kernel to hibernate",
                )
                time.sleep(1.5)  # the warm pool refills 1 s after a take: revive from a warm kernel
                seconds, _ = prompt(wire, sleeper, "read")
                assert seconds is not None
                revived.append(seconds)
                restored.append(command(wire, sleeper, "/kernel status").startswith("Kernel: idle"))
                seconds, _ = prompt(wire, awake, "read")
                assert seconds is not None
                live.append(seconds)
            return {"revived_s": revived, "live_s": live, "all_live_after": all(restored)}
        finally:
            wire.close()


def write_transcript(home: Path, session_id: str, cwd: str, messages: int) -> None:
    from agent_core import events as ev
    from agent_core.history.transcript import SessionStore

    store = SessionStore(home)
    writer = store.create(session_id, cwd)
    for i in range(messages // 2):
        question = f"question {i}: " + "words " * 30
        answer = f"answer {i}: " + "more words " * 60
        writer.event(ev.UserMessage((ev.TextPart(question),), f"u{i}"))
        writer.message({"role": "user", "content": question})
        writer.event(ev.MessageChunk(answer, f"a{i}"))
        writer.message({"role": "assistant", "content": answer})
    writer.close()


def list_and_load(
    env: dict[str, str], counts: Sequence[int], lengths: Sequence[int], runs: int
) -> dict[str, Any]:
    out: dict[str, Any] = {"list_ms": {}, "load_ms": {}}
    for count in counts:
        with tempfile.TemporaryDirectory() as scratch:
            home = Path(scratch) / "home"
            for i in range(count):
                write_transcript(home, f"sess_{i:06d}", scratch, 2)
            wire = server(env, scratch, CONTINUAL_ACP_HOME=str(home))
            try:
                wire.call("session/list", {})  # first: builds the index, imports
                times = []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    wire.call("session/list", {})
                    times.append((time.perf_counter() - t0) * 1000)
                out["list_ms"][count] = times
            finally:
                wire.close()
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        for length in lengths:
            write_transcript(home, f"sess_len{length}", scratch, length)
        wire = server(env, scratch, CONTINUAL_ACP_HOME=str(home))
        try:
            for length in lengths:
                times = []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    wire.call(
                        "session/load", {"sessionId": f"sess_len{length}", "cwd": scratch, "mcpServers": []}
                    )
                    times.append((time.perf_counter() - t0) * 1000)
                out["load_ms"][length] = times
            out["server_peak_rss_mib_after_loads"] = rss_kib(wire.proc.pid, "VmHWM") / 1024
        finally:
            wire.close()
    return out


def harness_curves(sizes: Sequence[int], runs: int) -> dict[str, Any]:
    from bench_harness import five_edits, make_store

    from harness_store import render_overview

    out: dict[str, Any] = {"overview_ms": {}, "apply_ms": {}}
    with tempfile.TemporaryDirectory() as scratch:
        for size in sizes:
            store, _ = make_store(Path(scratch) / f"h{size}", size, 0)
            state = store.load()
            times = []
            for i in range(runs):
                t0 = time.perf_counter()
                render_overview(state, query=f"pandas plot csv word{i}")
                times.append((time.perf_counter() - t0) * 1000)
            out["overview_ms"][size] = times
            times = []
            for i in range(runs):
                t0 = time.perf_counter()
                store.apply(five_edits(i), scope="global", trigger="model")
                times.append((time.perf_counter() - t0) * 1000)
            out["apply_ms"][size] = times
    return out


# Planted entries: a topic a user asks about in their own words (two of its three key words, in a
# sentence with words of no entry), among 10,000 others sharing the common words.
TOPICS = [
    ("terraform", "statefile", "locking"),
    ("celery", "broker", "retries"),
    ("postgres", "vacuum", "bloat"),
    ("webpack", "sourcemaps", "chunks"),
    ("grpc", "deadline", "metadata"),
    ("redis", "eviction", "maxmemory"),
    ("sphinx", "autodoc", "napoleon"),
    ("asyncpg", "pool", "timeouts"),
    ("kafka", "offsets", "rebalance"),
    ("numba", "nopython", "signature"),
    ("ansible", "inventory", "vault"),
    ("nginx", "upstream", "keepalive"),
    ("polars", "lazyframe", "collect"),
    ("sqlite", "wal", "checkpoint"),
    ("mypy", "protocol", "overload"),
    ("fastapi", "dependency", "lifespan"),
    ("pyarrow", "parquet", "rowgroup"),
    ("selenium", "webdriver", "waits"),
    ("airflow", "sensor", "backfill"),
    ("jinja", "autoescape", "filters"),
]
FILLER = "could you help me with the {a} thing where {b} keeps acting up again today please"


def relevance(entries: int, trust: str) -> dict[str, Any]:
    """For each planted entry (trust `trust`), does a prompt needing it get it into the harness section?"""
    from bench_harness import make_state

    from harness_store import HarnessEntry, HarnessState, render_overview

    base = make_state(entries, None)
    planted: dict[str, dict[str, HarnessEntry]] = {kind: dict(items) for kind, items in base.entries.items()}
    for i, words in enumerate(TOPICS):
        kind = ("memory", "prompt", "skill", "subagent")[i % 4]
        planted[kind][f"planted{i}"] = HarnessEntry(
            id=f"planted{i}",
            kind=kind,
            title=f"{words[0]} {words[1]} notes",
            content=f"When working with {' and '.join(words)}: check the {words[2]} settings first.",
            path="general",
            scope="global",
            reference={"type": "python", "import": "skills.x", "callable": "run"} if kind == "skill" else {},
            trust=trust,
            created_at="2026-01-01T00:00:00.000Z",
            updated_at="2020-01-01T00:00:00.000Z",  # older than every other entry: recency never helps it
        )
    state = HarnessState.build(planted, head=None)
    hits, total = 0, 0
    for i, words in enumerate(TOPICS):
        for a, b in ((words[0], words[1]), (words[1], words[2]), (words[0], words[2])):
            total += 1
            if f"planted{i}" in render_overview(state, query=FILLER.format(a=a, b=b)):
                hits += 1
    return {"entries": entries, "trust": trust, "queries": total, "hits": hits}


SCOPES = ("global", "project", "local")
SECTION_LINE = re.compile(r"prompt section harness: ([0-9.]+) ms, ([0-9]+) chars")


def three_scopes(entries: int) -> dict[str, HarnessStateT]:
    """`entries` bench entries (bench_harness.make_entry) dealt round-robin to global, project, local."""
    from bench_harness import make_entry

    from harness_store import HarnessState

    rng = random.Random(entries)
    by_scope: dict[str, dict[str, dict[str, Any]]] = {
        scope: {k: {} for k in ("prompt", "memory", "skill", "subagent")} for scope in SCOPES
    }
    for i in range(entries):
        scope = SCOPES[i % 3]
        entry = make_entry(i, rng).model_copy(update={"scope": scope})
        by_scope[scope][entry.kind][entry.id] = entry
    return {scope: HarnessState.build(kinds, head=None) for scope, kinds in by_scope.items()}


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def write_project(repo: Path, state: HarnessStateT) -> None:
    """The project scope as `ProjectStore` keeps it: one entry file per entry under the repository."""
    from harness_store.project_files import file_name, render_entry
    from harness_store.repository_backend import project_root

    entries_dir = project_root(repo) / "entries"
    for kind, items in state.entries.items():
        (entries_dir / kind).mkdir(parents=True, exist_ok=True)
        for entry_id, entry in items.items():
            (entries_dir / kind / file_name(entry_id)).write_text(render_entry(entry), encoding="utf-8")


def harness_through_server(
    env: dict[str, str], entries: int, runs: int, profile: Path | None = None
) -> dict[str, Any]:
    """A harness of `entries` entries (global + project + local, a third each) beside an empty one,
    two servers, interleaved: `_harness/state` (merged: the first page, and every page through
    `nextCursor`), `/harness`, a text-only prompt round trip (the system prompt with its harness
    section is built for every model request; the section's build time is read from the server's
    debug line on stderr), and an apply (`_harness/rollback` of a 5-edit refinement: its inverse
    is a 5-edit apply to the global store)."""
    from bench_harness import five_edits

    from agent_core.testing.scripted_model import ScriptedModelServer, text
    from harness_store import HarnessStore
    from harness_store.statefile import save_state
    from host_base.private_files import private_dir

    def save(root: Path, state: HarnessStateT) -> None:
        private_dir(root, exact=False)
        save_state(root / "harness_state.json", state)

    out: dict[str, Any] = {"entries": entries, "scopes": list(SCOPES)}
    scopes = three_scopes(entries)
    with tempfile.TemporaryDirectory() as scratch, ScriptedModelServer([], fallback=text("ok")) as model:
        wires, sids, logs, refinements = [], [], [], []
        for label, size in (("big", entries), ("empty", 0)):
            home = Path(scratch) / label
            repo = git_repo(Path(scratch) / f"{label}-repo")
            store = HarnessStore(home / "harness")
            if size:
                save(home / "harness", scopes["global"])
                write_project(repo, scopes["project"])
            # The refinements the apply rows roll back, one per run (written before the server starts).
            refinements.append(
                [store.apply(five_edits(i), scope="global", trigger="model").id for i in range(runs + 2)]
            )
            log_path = Path(scratch) / f"{label}.stderr"
            argv = OUR_SERVER
            if profile is not None and size:
                argv = (sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "acp_server")
            with log_path.open("wb") as log:
                wire = Wire(
                    argv,
                    {
                        **env,
                        "CONTINUAL_ACP_HOME": str(home),
                        "OPENAI_BASE_URL": model.base_url,
                        "CONTINUAL_ACP_EAGER_KERNEL": "0",
                        "CONTINUAL_ACP_LOG_LEVEL": "DEBUG",
                    },
                    scratch,
                    stderr=log,
                )
            wire.call("initialize", INIT_PARAMS)
            sid = wire.call("session/new", {"cwd": str(repo), "mcpServers": []})["sessionId"]
            if size:
                save(home / "sessions" / sid / "harness", scopes["local"])
            wires.append(wire)
            sids.append(sid)
            logs.append(log_path)
        try:
            keys = ("state", "state_all", "command", "prompt", "apply", "prompt_after_apply")
            timings: dict[str, list[list[float]]] = {key: [[], []] for key in keys}
            pages: list[int] = [0, 0]
            # Steady state first (no store changes between prompts, as in most turns), then each
            # apply followed by the first prompt after it (its section ranks a changed kind afresh).
            for i in range(runs + 2):  # the first two warm caches and imports
                for which, (wire, sid) in enumerate(zip(wires, sids, strict=True)):
                    params = {"sessionId": sid, "scope": "merged"}
                    t0 = time.perf_counter()
                    answer = wire.call("_harness/state", params)
                    t1 = time.perf_counter()
                    count = 1
                    while answer.get("nextCursor"):
                        answer = wire.call("_harness/state", {**params, "cursor": answer["nextCursor"]})
                        count += 1
                    t2 = time.perf_counter()
                    command(wire, sid, "/harness")
                    t3 = time.perf_counter()
                    prompt(wire, sid, f"pandas plot csv question {i}")
                    t4 = time.perf_counter()
                    pages[which] = count
                    if i >= 2:
                        for key, (a, b) in zip(keys, ((t0, t1), (t0, t2), (t2, t3), (t3, t4)), strict=False):
                            timings[key][which].append((b - a) * 1000)
            for i in range(runs + 2):
                for which, (wire, sid) in enumerate(zip(wires, sids, strict=True)):
                    t0 = time.perf_counter()
                    wire.call("_harness/rollback", {"sessionId": sid, "refinementId": refinements[which][i]})
                    t1 = time.perf_counter()
                    prompt(wire, sid, f"pandas plot csv question {i}")
                    t2 = time.perf_counter()
                    if i >= 2:
                        timings["apply"][which].append((t1 - t0) * 1000)
                        timings["prompt_after_apply"][which].append((t2 - t1) * 1000)
            for key, (big, empty) in timings.items():
                out[key] = {"big": big, "empty": empty}
            out["state_pages"] = {"big": pages[0], "empty": pages[1]}
        finally:
            for wire in wires:
                wire.close()
        steady, after = slice(2, runs + 2), slice(runs + 4, None)  # the warm-up prompts left out
        for label, log_path in zip(("big", "empty"), logs, strict=True):
            found = SECTION_LINE.findall(log_path.read_text(errors="replace"))
            out.setdefault("section", {})[label] = [float(ms) for ms, _ in found[steady]]
            out.setdefault("section_after_apply", {})[label] = [float(ms) for ms, _ in found[after]]
            out.setdefault("section_chars", {})[label] = int(found[-1][1]) if found else 0
    return out


# ---------------------------------------------------------------- report


def med(values: Sequence[float]) -> float:
    return statistics.median(values)


def spread(values: Sequence[float]) -> str:
    ordered = sorted(values)
    digits = 1 if ordered[-1] < 10 else 0
    return f"{ordered[0]:.{digits}f}-{ordered[-1]:.{digits}f}"


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def chart(figures: dict[str, Any]) -> str:
    from continual_eval.chart import Panel, Series, render_svg

    memory = figures["memory"]
    hib = [(m["sessions"], m["total_rss_mib"]) for m in memory if m["hibernation"]]
    live = [(m["sessions"], m["total_rss_mib"]) for m in memory if not m["hibernation"]]
    extrapolated = figures.get("live_extrapolated", [])
    memory_series = [Series("hibernation on", hib, color="#0072B2"), Series("off", live, color="#D55E00")]
    if extrapolated:
        memory_series.append(
            Series("off, extrapolated", [live[-1], *extrapolated], color="#D55E00", dashed=True)
        )
    memory_series.append(
        Series("1.5 GB target", [(1, 1536), (max(x for x, _ in hib), 1536)], color="#777777", dashed=True)
    )
    loads = [(int(k), med(v)) for k, v in figures["list_load"]["load_ms"].items()]
    lists = [(int(k), med(v)) for k, v in figures["list_load"]["list_ms"].items()]
    overview = [(int(k), med(v)) for k, v in figures["harness"]["overview_ms"].items()]
    apply = [(int(k), med(v)) for k, v in figures["harness"]["apply_ms"].items()]
    harness_series = [
        Series("section", overview, color="#E69F00"),
        Series("apply", apply, color="#000000"),
    ]
    through = figures.get("harness_server")
    if through and "section" in through:  # the same, measured inside the running server: empty vs large
        n = through["entries"]
        for key, name, color in (
            ("section", "section (srv)", "#E69F00"),
            ("apply", "apply (srv)", "#000000"),
            ("state", "state page (srv)", "#56B4E9"),
        ):
            points = [(0, med(through[key]["empty"])), (n, med(through[key]["big"]))]
            harness_series.append(Series(name, points, color=color, dashed=True))
    panels = [
        Panel("Total RSS (MiB) by open sessions", "MiB", memory_series, y_min=0),
        Panel(
            "session/load (ms) by transcript messages",
            "median ms",
            [Series("session/load", loads, color="#009E73")],
            y_min=0,
        ),
        Panel(
            "session/list (ms) by sessions on disk",
            "median ms",
            [Series("session/list", lists, color="#CC79A7")],
            y_min=0,
        ),
        Panel(
            "Harness (ms) by entries; srv, dashed: through the server",
            "median ms",
            harness_series,
            y_min=0,
        ),
    ]
    return render_svg(
        panels,
        title="continual-acp: cost as the work grows",
        subtitle=(
            f"{figures['nproc']} cores, a shared machine (load {figures['load_before']:.1f}); {figures['date']}"
            + (
                f"; dashed: through the server, load {through['load']:.1f}"
                if through and "load" in through
                else ""
            )
        ),
        x_label="sessions / messages / entries (see each panel's title)",
        columns=2,
        panel_width=560,
    )


def table(figures: dict[str, Any]) -> str:
    lines = [
        f"Run {figures['date']}, {figures['nproc']} cores ({figures['cpu']}); load average "
        f"{figures['load_before']:.1f} before, {figures['load_after']:.1f} after: **the machine was shared**, so timings "
        "are noisy (memory figures are not).",
        "",
        "| open sessions | total RSS, hibernation on (kernels live) | total RSS, hibernation off (kernels live) |",
        "|---|---|---|",
    ]
    by = {(m["sessions"], m["hibernation"]): m for m in figures["memory"]}
    extrapolated = dict(figures.get("live_extrapolated", []))
    for n in sorted({m["sessions"] for m in figures["memory"]}):
        on = by.get((n, True))
        off = by.get((n, False))
        on_text = f"{on['total_rss_mib']:.0f} MiB ({on['kernels']})" if on else "-"
        if off:
            off_text = f"{off['total_rss_mib']:.0f} MiB ({off['kernels']})"
        elif n in extrapolated:
            off_text = f"~{extrapolated[n]:.0f} MiB (extrapolated, not run)"
        else:
            off_text = "-"
        lines.append(f"| {n} | {on_text} | {off_text} |")
    revive = figures["revive"]
    rv = [s * 1000 for s in revive["revived_s"]]
    lv = [s * 1000 for s in revive["live_s"]]
    lines += [
        "",
        f"Revive (prompt sent -> its cell completed, warm pool on, {len(rv)} samples, interleaved with a live "
        f"kernel): hibernated **{med(rv):.0f} ms median** (p95 {p95(rv):.0f}, range {spread(rv)}); "
        f"live {med(lv):.0f} ms (p95 {p95(lv):.0f}); variables back every time: {revive['all_live_after']}.",
        "",
        "| | median ms (range) |",
        "|---|---|",
    ]
    for count, values in figures["list_load"]["list_ms"].items():
        lines.append(f"| `session/list`, {count} sessions | {med(values):.1f} ({spread(values)}) |")
    for length, values in figures["list_load"]["load_ms"].items():
        lines.append(
            f"| `session/load`, {length} messages (replay + kernel restore) | {med(values):.0f} ({spread(values)}) |"
        )
    for size, values in figures["harness"]["overview_ms"].items():
        lines.append(
            f"| harness prompt section, {size} entries (in-process) | {med(values):.1f} ({spread(values)}) |"
        )
    for size, values in figures["harness"]["apply_ms"].items():
        lines.append(
            f"| harness apply (5 edits), {size} entries (in-process) | {med(values):.1f} ({spread(values)}) |"
        )
    through = figures.get("harness_server")
    if through:
        lines += harness_rows(through)
    for rel in figures.get("relevance", []):
        lines.append(
            f"| planted {rel['trust']} entry in the prompt, {rel['entries']} entries, {rel['queries']} queries needing it "
            f"| **{rel['hits'] / rel['queries']:.0%}** ({rel['hits']}/{rel['queries']}) |"
        )
    peak = figures["list_load"].get("server_peak_rss_mib_after_loads")
    if peak:
        lines.append("")
        lines.append(f"Server peak RSS over all the loads above: {peak:.0f} MiB.")
    notes = figures.get("notes", [])
    if notes:  # measured separately (commands named), kept with the run they belong to
        lines.append("")
        lines += [f"* {note}" for note in notes]
    return "\n".join(lines)


def harness_rows(through: dict[str, Any]) -> list[str]:
    """The through-the-server harness rows: the large harness beside an empty one, same run."""
    n = through["entries"]
    where = "global + project + local" if "scopes" in through else "global"
    load = f", load {through['load']:.1f}" if "load" in through else ""
    names = {
        "state": "`_harness/state` (merged), first page",
        "state_all": f"`_harness/state` (merged), every page ({through.get('state_pages', {}).get('big', 1)} pages)",
        "command": "`/harness`",
        "prompt": "text-only prompt round trip",
        "section": "system prompt harness section, built in the server (debug line)",
        "apply": "apply, 5 edits (`_harness/rollback` of a 5-edit refinement)",
        "prompt_after_apply": "text-only prompt round trip, the first after that apply",
        "section_after_apply": "harness section of that first prompt after an apply (debug line)",
    }
    rows = []
    for key, label in names.items():
        if key not in through or not through[key]["big"]:
            continue
        big, empty = through[key]["big"], through[key]["empty"]
        rows.append(
            f"| {label}, {n} entries ({where}) vs none, through the server{load} | {med(big):.1f} vs "
            f"{med(empty):.1f} ({spread(big)} / {spread(empty)}) |"
        )
    return rows


THROUGH_NAMES = {
    "state": "_harness/state first page",
    "state_all": "_harness/state every page",
    "command": "/harness",
    "prompt": "text-only prompt round trip",
    "section": "system prompt harness section, in the server",
    "apply": "apply, 5 edits",
    "prompt_after_apply": "text-only prompt round trip, the first after an apply",
    "section_after_apply": "harness section of the first prompt after an apply",
}


def through_figures(through: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The through-the-server harness rows as figures: the large harness, and an empty one."""
    out: dict[str, dict[str, Any]] = {}
    for key, label in THROUGH_NAMES.items():
        if key not in through or not through[key]["big"]:
            continue
        out[f"{label}, {through['entries']:,} entries"] = summary(through[key]["big"], "ms")
        out[f"{label}, empty harness"] = summary(through[key]["empty"], "ms")
    return out


def suite_figures(figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What `table` shows, as figures (memory and counts measured once; timings with their spread)."""
    out: dict[str, dict[str, Any]] = {}
    for m in figures["memory"]:
        state = "on" if m["hibernation"] else "off"
        out[f"total RSS, {m['sessions']} sessions, hibernation {state}"] = single(m["total_rss_mib"], "MiB")
    revive = figures["revive"]
    out["revive a hibernated kernel: prompt -> cell completed"] = summary(
        [s * 1000 for s in revive["revived_s"]], "ms"
    )
    out["the same on a live kernel (baseline)"] = summary([s * 1000 for s in revive["live_s"]], "ms")
    for count, values in figures["list_load"]["list_ms"].items():
        out[f"session/list, {int(count):,} sessions"] = summary(values, "ms")
    for length, values in figures["list_load"]["load_ms"].items():
        out[f"session/load, {int(length):,} messages (replay + kernel restore)"] = summary(values, "ms")
    for size, values in figures["harness"]["overview_ms"].items():
        out[f"harness prompt section, {int(size):,} entries (in-process)"] = summary(values, "ms")
    for size, values in figures["harness"]["apply_ms"].items():
        out[f"harness apply (5 edits), {int(size):,} entries (in-process)"] = summary(values, "ms")
    for rel in figures.get("relevance", []):
        name = f"planted {rel['trust']} entry in the prompt, {rel['entries']:,} entries"
        out[name] = single(round(100 * rel["hits"] / rel["queries"], 1), "% of queries")
    if "harness_server" in figures:
        out.update(through_figures(figures["harness_server"]))
    return out


def write_results(figures: dict[str, Any], svg: str) -> None:
    """The chart (`scale.svg`, which RESULTS.md shows in the scale section) and the table on stdout;
    RESULTS.md itself is generated from benchmarks/results/ (`python -m benchmarks`)."""
    (HERE / "scale.svg").write_text(svg, encoding="utf-8")
    print(table(figures))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OPENAI_API_KEY="bench",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        CONTINUAL_ACP_MODEL="scripted-model",
        CONTINUAL_ACP_MODE="auto",
        XDG_CONFIG_HOME=tempfile.mkdtemp(prefix="bench-config-"),
    )
    return env


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", default="1,10,50,100")
    parser.add_argument(
        "--live-max", type=int, default=50, help="largest session count run without hibernation"
    )
    parser.add_argument("--revive-samples", type=int, default=12)
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument("--write-results", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--from-json", type=Path, help="only render the table and chart of a saved run")
    parser.add_argument(
        "--harness-server",
        type=int,
        metavar="ENTRIES",
        help="only the through-the-server harness figures, added to --from-json",
    )
    parser.add_argument(
        "--relevance",
        type=int,
        metavar="ENTRIES",
        help="only the planted-entry figures, added to --from-json",
    )
    parser.add_argument(
        "--profile", type=Path, help="with --harness-server: cProfile the large-harness server into this file"
    )
    parser.add_argument("--runs", type=int, default=15, help="samples per through-the-server harness row")
    args = parser.parse_args(argv)
    if args.harness_server and not args.from_json:  # that part alone, printed (and saved with --json)
        load = os.getloadavg()[0]
        through = harness_through_server(_env(), args.harness_server, args.runs, args.profile)
        through["load"] = max(load, os.getloadavg()[0])
        if args.json:
            args.json.write_text(json.dumps(through, indent=1))
        print("\n".join(harness_rows(through)))
        emit(through_figures(through), settings={"runs": args.runs, "entries": args.harness_server})
        return 0
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        if args.relevance:
            saved["relevance"] = [relevance(args.relevance, trust) for trust in ("verified", "candidate")]
            args.from_json.write_text(json.dumps(saved, indent=1))
        if args.harness_server:
            load = os.getloadavg()[0]
            saved["harness_server"] = harness_through_server(_env(), args.harness_server, args.runs)
            saved["harness_server"]["load"] = max(load, os.getloadavg()[0])
            saved["harness_server"]["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            args.from_json.write_text(json.dumps(saved, indent=1))
        return report(saved, args.write_results)

    counts = [int(c) for c in args.sessions.split(",")]
    list_counts, lengths, sizes, runs = (10, 100, 1000), (100, 1000, 5000), (100, 1000, 10_000), 15
    if args.quick:
        list_counts, lengths, sizes, runs = (10, 100), (100, 1000), (100, 1000), 5
    compiled = compile_our_packages()
    env = _env()
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
        "load_before": os.getloadavg()[0],
        "bytecode": compiled,
        "memory": [],
    }
    for n in counts:
        for hibernate in (True, False):
            if not hibernate and n > args.live_max:
                continue
            point = memory_point(env, n, hibernate)
            print(json.dumps(point), flush=True)
            figures["memory"].append(point)
    live = [m for m in figures["memory"] if not m["hibernation"]]
    if live and any(n > args.live_max for n in counts):
        # Per-session slope from the largest two points measured without hibernation.
        points = [(m["sessions"], m["total_rss_mib"]) for m in live[-2:]]
        if len(points) == 1:  # one point: from the server alone (0 sessions) to it
            points.insert(0, (0, live[0]["server_rss_mib"]))
        (n0, r0), (n1, r1) = points
        slope = (r1 - r0) / (n1 - n0)
        figures["live_extrapolated"] = [(n, r1 + slope * (n - n1)) for n in counts if n > args.live_max]
    figures["revive"] = revive_latency(env, args.revive_samples)
    print(json.dumps(figures["revive"]), flush=True)
    figures["list_load"] = list_and_load(env, list_counts, lengths, runs)
    figures["harness"] = harness_curves(sizes, runs)
    figures["relevance"] = [relevance(sizes[-1], trust) for trust in ("verified", "candidate")]
    figures["load_after"] = os.getloadavg()[0]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return report(figures, args.write_results)


def report(figures: dict[str, Any], write: bool) -> int:
    svg = chart(figures)
    print(table(figures))
    if write:
        write_results(figures, svg)
    emit(suite_figures(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
