"""The panel's read side without HTTP: the per-store history cache and `ensure_panel`."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

from acp_server.panel.run import ensure_panel
from acp_server.panel.sources import PanelData
from harness_store import HarnessStore

from .populate import create, proposal


def _apply(store: HarnessStore, n: int) -> str:
    return store.apply(
        proposal(create("memory", f"Fact {n}", f"fact number {n}"), summary=f"fact {n}"),
        scope="global",
        trigger="user",
    ).id


def test_the_history_cache_picks_up_every_appended_record(tmp_path: Path) -> None:
    store = HarnessStore(tmp_path / "home" / "harness")
    _apply(store, 0)
    data = PanelData(tmp_path / "home")
    view = data.views()[0]
    assert [r.id for r in view.records] == [r.id for r in store.history()]
    for n in range(1, 30):  # more than the first small page the cache reads
        _apply(store, n)
    data.views()
    assert [r.id for r in view.records] == [r.id for r in store.history()]
    assert view.last_writer[("memory", "fact_29")] == store.history(1)[-1].id


def test_the_history_cache_starts_over_when_the_file_is_replaced(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = HarnessStore(home / "harness")
    for n in range(3):
        _apply(store, n)
    data = PanelData(home)
    data.views()
    other = HarnessStore(tmp_path / "other" / "harness")
    replacement = [_apply(other, n) for n in range(10, 12)]
    shutil.copy(other.history_path, home / "harness" / "refinements.jsonl.new")
    (home / "harness" / "refinements.jsonl.new").replace(store.history_path)
    assert [r.id for r in data.views()[0].records] == replacement


def test_ensure_panel_starts_one_panel_per_home_and_serves_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _apply(HarnessStore(home / "harness"), 0)
    url = ensure_panel(home)
    assert ensure_panel(home) == url
    with urllib.request.urlopen(url.replace("/?", "/api/timeline?"), timeout=30) as response:
        assert json.loads(response.read())["total"] == 1


def test_entries_carry_their_use_in_prompts_and_a_review_mark(tmp_path: Path) -> None:
    from agent_core.trust.entry_usage import TurnUsage, UsageLedger

    home = tmp_path / "home"
    store = HarnessStore(home / "harness")
    _apply(store, 0)
    _apply(store, 1)
    ledger = UsageLedger(home)
    for _ in range(3):  # fact_0 was in three prompts whose turns all had a failed cell
        ledger.append(TurnUsage(entries=["fact_0"], cells=1, cells_failed=1).record("s", "end_turn"))
    rows = {row["id"]: row for row in PanelData(home).entries()["entries"]}
    assert rows["fact_0"]["usage"]["turns"] == 3
    assert rows["fact_0"]["usage"]["review"] == "tied to failures (3 of 3 turns went badly)"
    assert rows["fact_0"]["usage"]["text"].startswith("in the prompt for 3 turns, last ")
    marked = PanelData(home).entries(marked=True)
    assert [row["id"] for row in marked["entries"]] == ["fact_0"] and marked["counts"]["memory"] == 1
    never = {
        "shown": 0, "followed": 0, "passed": 0, "failed": 0, "failed_gates": 0, "failed_cells": 0,
        "cancelled": 0, "rolled_back": 0, "corrected": 0, "last_shown": None, "hits": 0, "misses": 0,
        "standing": "neutral",
    }  # fmt: skip
    assert rows["fact_1"]["usage"] == {
        "turns": 0, "last_used": None, "bad_turns": 0, "review": None, "text": "never in a prompt yet",
        "counters": never,
    }  # fmt: skip
    assert rows["fact_0"]["usage"]["counters"]["shown"] == 3
