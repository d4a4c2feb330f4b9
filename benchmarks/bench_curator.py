"""The curator's deterministic pass on a 10,000-entry harness (target: at most 1 s).

    .venv/bin/python benchmarks/bench_curator.py [--entries 10000] [--runs 7]

In-process (harness_store): `plan_curation` over a state of N memory entries, where about 5% are
exact duplicates of another, 5% near duplicates (the same words reordered), 1% content-free, and a
standing function marks about 2% harmful and 5% unfollowed (as the counters would). The plan's
sizes are printed beside the times so a faster run that proposes less is visible. Also timed: the
pass applied through `Store.curate` (one history record) on a fresh store of the same entries.
Prints the median with p10/p90 and min/max of `--runs` runs, then the figures line the suite reads.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness_store import HarnessState, HarnessStore  # noqa: E402
from harness_store.curator import plan_curation  # noqa: E402
from harness_store.models import HarnessEntry  # noqa: E402

sys.path.insert(0, str(HERE))
from figures import emit, single, summary  # noqa: E402

WORDS = (
    "make check pytest ruff mypy build cache lock docker compose config install module package "
    "import test gate kernel session prompt review deploy branch commit schema migrate index query"
).split()
STAMP = "2026-11-01T00:00:00+00:00"


def entries(count: int, seed: int = 7) -> dict[str, HarnessEntry]:
    rng = random.Random(seed)
    out: dict[str, HarnessEntry] = {}
    contents: list[str] = []
    for index in range(count):
        roll = rng.random()
        if roll < 0.05 and contents:
            content = rng.choice(contents).upper() + "!"  # exact duplicate once normalized
        elif roll < 0.10 and contents:
            words = rng.choice(contents).split()
            rng.shuffle(words)
            content = " ".join(words)  # near duplicate: the same words
        elif roll < 0.11:
            content = "..."  # content-free (stored before such entries were refused)
        else:
            content = " ".join(rng.choice(WORDS) for _ in range(12)) + f" note {index}"
            contents.append(content)
        trust = "verified" if rng.random() < 0.5 else "candidate"
        entry_id = f"entry_{index:05d}"
        out[entry_id] = HarnessEntry(
            id=entry_id, kind="memory", title=f"Entry {index}", content=content, scope="global",
            source="agent", trust=trust, created_at=STAMP, updated_at=STAMP,
        )  # fmt: skip
    return out


def standing(entry: HarnessEntry) -> str:
    bucket = int(entry.id[-5:]) % 100
    return "harmful" if bucket < 2 else "unfollowed" if bucket < 7 else "neutral"


def stats(times: list[float]) -> str:
    ordered = sorted(times)
    p10 = ordered[max(0, int(len(ordered) * 0.1))]
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"median {statistics.median(times) * 1000:.0f} ms (p10 {p10 * 1000:.0f}, p90 {p90 * 1000:.0f}, "
        f"min {ordered[0] * 1000:.0f}, max {ordered[-1] * 1000:.0f}; {len(times)} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    items = entries(args.entries)
    state = HarnessState.build({"memory": items})
    plan_curation(state, standing=standing)  # warm: imports, pydantic, caches
    times: list[float] = []
    plan = None
    for _ in range(args.runs):
        started = time.perf_counter()
        plan = plan_curation(state, standing=standing)
        times.append(time.perf_counter() - started)
    assert plan is not None
    print(f"plan_curation over {args.entries} entries: {stats(times)}  (target <= 1000 ms)")
    print(f"  proposes {plan.counts()}, {len(plan.held)} held, ~{plan.tokens_saved} prompt tokens saved")
    with tempfile.TemporaryDirectory() as tmp:
        store = HarnessStore(Path(tmp) / "harness")
        edits = [
            {"action": "create", "kind": "memory", "id": e.id, "title": e.title, "content": e.content}
            for e in items.values()
            if e.content != "..."  # refused at write time now; the plan above covers them
        ]
        seed = store.apply({"summary": "seed", "edits": edits}, scope="global", trigger="model")
        verified = [k for k, e in items.items() if e.trust == "verified"]
        store.record_review(seed.id, "apply", edit_ids=verified)
        applied_plan = plan_curation(store.load(), standing=standing)
        started = time.perf_counter()
        result = store.curate(applied_plan)
        elapsed = time.perf_counter() - started
        done = sum(e.applied for e in result.applied_edits)
        print(
            f"Store.curate (one history record) of {len(applied_plan.actions)} actions on a fresh store: "
            f"{elapsed * 1000:.0f} ms ({done} applied, {len(result.errors)} refused)"
        )
    figures = {f"plan_curation, {args.entries:,} entries": summary([t * 1000 for t in times], "ms")}
    labels = {"merge": "join duplicates"}  # the plan's action names, as the product's docs say them
    for action, count in sorted(plan.counts().items()):
        figures[f"plan proposes: {labels.get(action, action)}"] = single(count, "proposals")
    figures["plan holds"] = single(len(plan.held), "proposals")
    figures["prompt tokens saved"] = single(plan.tokens_saved, "tokens")
    figures[f"Store.curate, {args.entries:,} entries (one history record)"] = single(elapsed * 1000, "ms")
    emit(figures, settings={"entries": args.entries, "runs": args.runs})


if __name__ == "__main__":
    main()
