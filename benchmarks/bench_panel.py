"""Review panel benchmarks (targets: first paint <= 1 s, SSE update <= 1 s end to end).

    .venv/bin/python benchmarks/bench_panel.py [--runs N]

A data home with 10,000 history records and 1,000 entries (global store; records synthesized the
way the store writes them: 1,000 creates, then 9,000 updates of random entries), the panel served
on 127.0.0.1, headless chromium (Debian's) over the DevTools protocol.

* panel start: bind + read every history once (what `harness ui` does before printing its URL)
* first paint of the timeline page and of the entries page (paged: 50 refinements / 100 entries):
  the browser's first-contentful-paint and the `panel-ready` mark (first view rendered with data)
* live update: wall clock from just before `HarnessStore.apply` in this process until the open
  page shows the new refinement at the top of its timeline (file watch 250 ms + SSE + refetch + render)

Ends with the figures line the suite reads (`python -m benchmarks panel`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))

from figures import emit, summary  # noqa: E402

from acp_server.panel.run import PanelServer  # noqa: E402
from harness_store import HarnessEntry, HarnessState, HarnessStore, RefinementResult  # noqa: E402
from harness_store.models import AppliedEdit  # noqa: E402
from harness_store.statefile import save_state  # noqa: E402
from tests.panel.cdp import Browser  # noqa: E402
from tests.panel.conftest import start_panel  # noqa: E402

KINDS = ("prompt", "memory", "skill", "subagent")
WORDS = (
    "pandas numpy plot csv git rebase test pytest ruff format docker kernel model prompt cache deploy".split()
)


def _entry(i: int, version: int, rng: random.Random, stamp: str) -> HarnessEntry:
    kind = KINDS[i % 4]
    return HarnessEntry(
        id=f"e{i:04d}",
        kind=kind,
        title=f"Entry {i} about {rng.choice(WORDS)}",
        content=" ".join(rng.choice(WORDS) for _ in range(40)) + f" (v{version})",
        scope="global",
        reference={"type": "python", "import": "skills.x", "callable": "run"} if kind == "skill" else {},
        trust=rng.choice(["verified", "candidate", "candidate"]),
        created_at="2026-01-01T00:00:00.000Z",
        updated_at=stamp,
        version=version,
    )


def build_home(home: Path, records: int, entries: int) -> None:
    rng = random.Random(17)
    root = home / "harness"
    root.mkdir(parents=True)
    current: dict[int, HarnessEntry] = {}
    lines: list[str] = []
    last = ""
    for n in range(records):
        stamp = f"2026-01-{1 + n // 86400:02d}T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z"
        rid = f"r-20260101-{n // 1000:06d}{n % 1000:03d}-{n:08x}"
        i = n if n < entries else rng.randrange(entries)
        before = current.get(i)
        after = _entry(i, (before.version + 1) if before else 1, rng, stamp)
        current[i] = after
        edit = AppliedEdit(
            action="update" if before else "create",
            kind=after.kind,
            id=after.id,
            title=after.title,
            content=after.content,
            before=before,
            after=after,
            applied=True,
        )
        record = RefinementResult(
            id=rid,
            summary=f"{edit.action} {after.kind} {after.id}",
            scope="global",
            trigger=rng.choice(["model", "auto", "user"]),
            session_id=None,
            applied_edits=[edit],
            created_at=stamp,
        )
        lines.append(record.model_dump_json() + "\n")
        last = rid
    (root / "refinements.jsonl").write_text("".join(lines), encoding="utf-8")
    by_kind: dict[str, dict[str, HarnessEntry]] = {k: {} for k in KINDS}
    for entry in current.values():
        by_kind[entry.kind][entry.id] = entry
    save_state(root / "harness_state.json", HarnessState.build(by_kind, head=last))


async def first_paint(browser: Browser, url: str, runs: int) -> tuple[list[float], list[float]]:
    fcp, ready = [], []
    for _ in range(runs):
        page = await browser.new_page()
        await page.navigate(url)
        await page.wait_for("document.body.dataset.ready === '1'")
        fcp.append(await page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime"))
        ready.append(await page.evaluate("performance.getEntriesByName('panel-ready')[0].startTime"))
        await page.call("Page.close")
    return fcp, ready


async def live_latency(browser: Browser, url: str, store: HarnessStore, runs: int) -> list[float]:
    page = await browser.new_page()
    await page.navigate(url + "#timeline")
    await page.wait_for(
        "document.body.dataset.ready === '1' && document.getElementById('live').className === 'live on'"
    )
    out = []
    for n in range(runs):
        start = time.time()
        result = store.apply(
            {
                "summary": f"bench live {n}",
                "edits": [
                    {
                        "action": "create",
                        "kind": "memory",
                        "id": f"live_{n}",
                        "title": f"Live {n}",
                        "content": f"live fact {n}",
                    }
                ],
            },
            scope="global",
            trigger="user",
        )
        seen = await page.wait_for(
            f"document.querySelector('#timeline .tl-item')?.dataset.refinement === '{result.id}' && Date.now()"
        )
        out.append(seen - start * 1000)
    return out


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms (min {min(values):.0f}, max {max(values):.0f})"


async def main(runs: int, entries: int = 1_000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        t0 = time.perf_counter()
        build_home(home, 10_000, entries)
        size = (home / "harness" / "refinements.jsonl").stat().st_size
        print(
            f"built 10,000 records ({size / 1e6:.1f} MB) + {entries:,} entries in {time.perf_counter() - t0:.1f} s"
        )
        starts = []
        for _ in range(3):
            server = PanelServer(home)
            t0 = time.perf_counter()
            await server.start()
            starts.append((time.perf_counter() - t0) * 1000)
            await server.stop()
        panel = start_panel(home)
        browser = await Browser.launch(Path(tmp) / "profile")
        try:
            await first_paint(browser, panel.url + "#timeline", 1)  # warm the browser's caches once
            fcp_t, ready_t = await first_paint(browser, panel.url + "#timeline", runs)
            fcp_e, ready_e = await first_paint(browser, panel.url + "#entries", runs)
            live = await live_latency(browser, panel.url, HarnessStore(home / "harness"), runs)
        finally:
            await browser.close()
            panel.stop()
    load = os.getloadavg()
    print(
        f"machine: {platform.processor() or platform.machine()}, nproc {os.cpu_count()}, load {load[0]:.1f}/{load[1]:.1f}"
    )
    print(f"panel start (bind + read 10,000 records): {_median(starts)}")
    print(f"timeline page, first contentful paint:   {_median(fcp_t)}")
    print(f"timeline page, first page of data shown: {_median(ready_t)}")
    print(f"entries page, first contentful paint:    {_median(fcp_e)}")
    print(f"entries page, first 100 entries shown:   {_median(ready_e)}")
    print(f"apply -> new refinement on the open page: {_median(live)}")
    figures = {
        "panel start: read 10,000 records once": summary(starts, "ms"),
        "timeline: first contentful paint": summary(fcp_t, "ms"),
        "timeline: first 50 refinements rendered": summary(ready_t, "ms"),
        "entries: first contentful paint": summary(fcp_e, "ms"),
        f"entries: first 100 of {entries:,} rendered": summary(ready_e, "ms"),
        "apply in another process -> shown on the open page": summary(live, "ms"),
    }
    emit(figures, settings={"runs": runs, "entries": entries, "records": 10_000})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--entries", type=int, default=1_000, help="entries in the store (10,000: the large harness)"
    )
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.entries))
