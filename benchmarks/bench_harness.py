"""harness_store benchmarks against their targets. Prints medians and ratios measured in one run.

    .venv/bin/python benchmarks/bench_harness.py [--quick]

* apply of a 5-edit proposal (lock + re-read + validate + save + history append) with 1k / 10k entries
* the same apply with 1k vs 100k history records (history-length independence)
* get_refinement with 100k history records, warm (index) and cold (fresh store: binary search); rollback
* render_overview with 10k entries (with and without a query)

Ends with the figures line the suite reads (`python -m benchmarks harness`).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from figures import emit, single, summary

from harness_store import HarnessEntry, HarnessState, HarnessStore, RefinementResult, render_overview
from harness_store.models import AppliedEdit
from harness_store.statefile import save_state

NOW = "2026-01-01T00:00:00.000Z"
# 16 common topic words plus a long tail of 2,000 others, so entries overlap with a prompt the way
# real notes do (some share a word or two, most share none).
WORDS = (
    "pandas numpy plot csv git rebase test pytest ruff format docker kernel model prompt cache deploy".split()
)
TAIL = [f"word{i}" for i in range(2000)]


def make_entry(i: int, rng: random.Random) -> HarnessEntry:
    kind = ("prompt", "memory", "skill", "subagent")[i % 4]
    words = " ".join(rng.choice(WORDS) if rng.random() < 0.1 else rng.choice(TAIL) for _ in range(30))
    return HarnessEntry(
        id=f"e{i:06d}",
        kind=kind,
        title=f"Entry {i} {rng.choice(WORDS)}",
        content=f"Note {i}: {words}",
        path=rng.choice(["general", "tools", "data"]),
        scope="global",
        reference={"type": "python", "import": "skills.x", "callable": "run"} if kind == "skill" else {},
        trust=rng.choice(["verified", "candidate", "candidate", "rejected"]),
        created_at=NOW,
        updated_at=f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
    )


def make_state(n: int, head: str | None) -> HarnessState:
    rng = random.Random(n)
    entries: dict[str, dict[str, HarnessEntry]] = {k: {} for k in ("prompt", "memory", "skill", "subagent")}
    for i in range(n):
        entry = make_entry(i, rng)
        entries[entry.kind][entry.id] = entry
    return HarnessState.build(entries, head=head)


def write_history(path: Path, count: int) -> list[str]:
    """`count` synthetic one-edit records (~0.8 KB each), written by templating one serialized record."""
    rng = random.Random(count)
    after = make_entry(0, rng)
    template = RefinementResult(
        id="ID_PLACEHOLDER",
        summary="synthetic",
        scope="global",
        trigger="model",
        created_at=NOW,
        applied_edits=[
            AppliedEdit(
                action="create",
                kind="prompt",
                id="e000000",
                title=after.title,
                content=after.content,
                after=after,
                applied=True,
            )
        ],
    ).model_dump_json()
    # Real ids ascend in time (they are made under the store lock); a few share a millisecond.
    ids = [f"r-20260101-{(i // 3) // 1000 % 1000000:06d}{(i // 3) % 1000:03d}-{i:08x}" for i in range(count)]
    with open(path, "w", encoding="utf-8") as handle:
        for chunk in range(0, count, 10_000):
            handle.write(
                "".join(template.replace("ID_PLACEHOLDER", rid) + "\n" for rid in ids[chunk : chunk + 10_000])
            )
    return ids


def make_store(root: Path, entries: int, history: int) -> tuple[HarnessStore, list[str]]:
    root.mkdir(parents=True)
    ids = write_history(root / "refinements.jsonl", history) if history else []
    save_state(root / "harness_state.json", make_state(entries, ids[-1] if ids else None))
    return HarnessStore(root), ids


def five_edits(n: int) -> dict[str, object]:
    edits: list[dict[str, object]] = []
    for j in range(5):
        edits.append(
            {
                "action": "create",
                "kind": "memory",
                "id": f"bench_{n}_{j}",
                "title": f"Bench {n} {j}",
                "content": f"benchmark fact {n} {j} " * 5,
            }
        )
    return {"summary": f"bench {n}", "edits": edits}


CPU: dict[str, float] = {}
WALL: dict[str, list[float]] = {}  # every wall-clock sample by label, for the figures line


def median_ms(fn: Callable[[int], object], runs: int, label: str = "") -> float:
    """Median wall-clock ms; the median CPU ms of this process is kept in CPU[label] (other
    work may load the machine, and CPU time is much less sensitive to that)."""
    times, cpu = [], []
    for i in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn(i)
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    CPU[label] = statistics.median(cpu)
    WALL[label] = times
    return statistics.median(times)


def cpu_of(label: str) -> str:
    return f"cpu {CPU[label]:.2f} ms"


def bench_apply(tmp: Path, entries: int, history: int, runs: int) -> float:
    store, _ = make_store(tmp / f"apply-{entries}-{history}", entries, history)
    store.load()
    return median_ms(
        lambda i: store.apply(five_edits(i), scope="global", trigger="model"), runs, f"{entries}/{history}"
    )


def bench_apply_interleaved(
    tmp: Path, entries: int, histories: tuple[int, int], runs: int
) -> tuple[float, float]:
    """Median apply time for two history lengths, alternating calls so machine load hits both alike."""
    stores = [make_store(tmp / f"interleaved-{h}", entries, h)[0] for h in histories]
    wall: list[list[float]] = [[], []]
    cpu: list[list[float]] = [[], []]
    for i in range(runs):
        for which, store in enumerate(stores):
            start, start_cpu = time.perf_counter(), time.process_time()
            store.apply(five_edits(i), scope="global", trigger="model")
            wall[which].append((time.perf_counter() - start) * 1000)
            cpu[which].append((time.process_time() - start_cpu) * 1000)
    for which, history in enumerate(histories):
        CPU[f"{entries}/{history}"] = statistics.median(cpu[which])
        WALL[f"{entries}/{history}"] = wall[which]
    return statistics.median(wall[0]), statistics.median(wall[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer runs and 20k instead of 100k records")
    args = parser.parse_args()
    runs = 10 if args.quick else 30
    big = 20_000 if args.quick else 100_000
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        "?",
    )
    print(
        f"machine: {os.cpu_count()} cpus, {cpu}, python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        a1k = bench_apply(tmp, 1_000, 0, runs)
        a10k = bench_apply(tmp, 10_000, 0, runs)
        print(f"apply 5 edits, 1k entries:            {a1k:8.2f} ms   {cpu_of('1000/0')}   (target <= 15)")
        print(f"apply 5 edits, 10k entries:           {a10k:8.2f} ms   {cpu_of('10000/0')}   (target <= 150)")

        h1k, h100k = bench_apply_interleaved(tmp, 1_000, (1_000, big), runs * 2)
        ratio_cpu = CPU[f"1000/{big}"] / CPU["1000/1000"]
        print(f"apply, 1k entries, {1_000:>7,} history:   {h1k:8.2f} ms   {cpu_of('1000/1000')}")
        print(
            f"apply, 1k entries, {big:>7,} history:   {h100k:8.2f} ms   {cpu_of(f'1000/{big}')}   "
            f"ratio {h100k / h1k:.2f} wall, {ratio_cpu:.2f} cpu (target <= 1.2)"
        )

        store, ids = make_store(tmp / "lookup", 1_000, big)
        rng = random.Random(7)
        # Cold: a fresh store object per lookup (a CLI process, a new session): binary search.
        cold_ms = median_ms(lambda i: HarnessStore(store.root).get_refinement(rng.choice(ids)), 50, "cold")
        start = time.perf_counter()
        store.backend.history_count()  # the full id -> offset index, built once per process when needed
        build = (time.perf_counter() - start) * 1000
        get_ms = median_ms(lambda i: store.get_refinement(rng.choice(ids)), 200, "get")
        print(f"get_refinement, {big:,} records, warm: {get_ms:8.3f} ms   (target <= 50)")
        print(
            f"get_refinement, {big:,} records, cold: {cold_ms:8.3f} ms   (full index build once: {build:.0f} ms)"
        )
        # Rollback of the newest record (a create of e000000 in history; the entry exists in the state).
        rb_ms = median_ms(lambda i: store.rollback(ids[-1 - i], force=True), min(runs, 10), "rollback")
        print(f"rollback (lookup + apply), {big:,}:  {rb_ms:8.2f} ms   {cpu_of('rollback')}")

        state = make_state(10_000, None)
        render_overview(state)  # warm the token cache (the prompt builder calls this every turn)
        ov = median_ms(lambda i: render_overview(state), runs, "ov")
        ovq = median_ms(
            lambda i: render_overview(state, query=f"how do I plot a csv with pandas {i}"), runs, "ovq"
        )
        print(f"render_overview, 10k entries:         {ov:8.2f} ms   {cpu_of('ov')}   (target <= 20)")
        print(f"render_overview, 10k entries + query: {ovq:8.2f} ms   {cpu_of('ovq')}   (target <= 20)")

    figures = {
        "apply, 5 edits, 1,000 entries (wall)": summary(WALL["1000/0"], "ms"),
        "apply, 5 edits, 10,000 entries (wall)": summary(WALL["10000/0"], "ms"),
        "apply, 1k entries, 1,000 history records": summary(WALL["1000/1000"], "ms"),
        f"apply, 1k entries, {big:,} history records": summary(WALL[f"1000/{big}"], "ms"),
        f"ratio {big:,} / 1,000 history records (interleaved)": single(round(h100k / h1k, 3), "x"),
        f"get_refinement, {big:,} records, warm": summary(WALL["get"], "ms"),
        f"get_refinement, {big:,} records, cold": summary(WALL["cold"], "ms"),
        f"full index build, {big:,} records": single(round(build, 1), "ms"),
        f"rollback, {big:,} records": summary(WALL["rollback"], "ms"),
        "render_overview, 10,000 entries, no query": summary(WALL["ov"], "ms"),
        "render_overview, 10,000 entries, with a query": summary(WALL["ovq"], "ms"),
    }
    emit(figures, settings={"runs": runs, "history_records": big})


if __name__ == "__main__":
    main()
