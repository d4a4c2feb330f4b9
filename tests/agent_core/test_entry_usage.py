"""Per-entry usage: the entries a turn's prompt showed, how the turn went, and review marks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent_core import events as ev
from agent_core.trust.entry_usage import (
    EntryUsage,
    TurnUsage,
    UsageLedger,
    describe,
    home_usage,
    prompt_entry_keys,
    usage_by_entry,
    usage_section,
)
from harness_store import HarnessState, HarnessStore, render_overview
from harness_store.models import HarnessEntry

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _entry(entry_id: str, kind: str = "memory", trust: str = "candidate") -> HarnessEntry:
    stamp = "2026-11-01T00:00:00+00:00"
    return HarnessEntry(
        id=entry_id, kind=kind, title=f"Title of {entry_id}", content="Some content.", trust=trust,
        scope="global", version=1, created_at=stamp, updated_at=stamp,
    )  # fmt: skip


def _overview(*entries: HarnessEntry) -> str:
    by_kind: dict[str, dict[str, HarnessEntry]] = {}
    for entry in entries:
        by_kind.setdefault(entry.kind, {})[entry.id] = entry
    return str(render_overview(HarnessState.build(by_kind)))


def test_the_keys_of_a_rendered_overview_are_read_back_exactly() -> None:
    overview = _overview(_entry("test_command"), _entry("style", trust="verified"), _entry("greet", "prompt"))
    assert sorted(prompt_entry_keys(overview)) == ["greet", "style", "test_command"]
    assert prompt_entry_keys("") == []


def test_a_turn_counts_its_cells_gates_and_entries() -> None:
    usage = TurnUsage(started=NOW - timedelta(seconds=5))
    usage.saw(_overview(_entry("a")))
    usage.saw(_overview(_entry("a"), _entry("b")))  # a later request of the same turn
    usage.note(ev.CellFinished("c1", "completed"))
    usage.note(ev.CellFinished("c2", "failed", error="ValueError: x"))
    usage.note(ev.GateFinished("g1", "pytest", "failed", "failed (exit code 1)", 1))
    usage.note(ev.GateFinished("g2", "pytest", "failed", "not rerun: unchanged", None))
    record = usage.record("sess_1", "end_turn", at=NOW)
    assert record == {
        "started": "2026-12-01T11:59:55.000+00:00", "at": "2026-12-01T12:00:00.000+00:00",
        "session": "sess_1", "entries": ["a", "b"], "followed": [], "cells": 2,
        "cells_failed": 1, "gates_passed": 0, "gates_failed": 1, "stop_reason": "end_turn",
    }  # fmt: skip


def test_the_ledger_appends_lines_and_skips_a_torn_one(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path)
    ledger.append(TurnUsage(entries=["a"]).record("s", "end_turn", at=NOW))
    ledger.append(TurnUsage().record("s", "end_turn", at=NOW))  # no entry shown: nothing to say
    with ledger.path.open("a") as fh:
        fh.write('{"entries": ["a"], "at": "2026-')  # a crash mid-write
    assert [r["entries"] for r in ledger.read()] == [["a"]]
    assert ledger.path.stat().st_mode & 0o777 == 0o600


def test_usage_per_entry_counts_turns_last_use_and_bad_turns() -> None:
    records = [
        {
            "at": "2026-11-30T10:00:00+00:00",
            "entries": ["a", "b"],
            "cells_failed": 1,
            "stop_reason": "end_turn",
        },
        {"at": "2026-12-01T10:00:00+00:00", "entries": ["a"], "stop_reason": "cancelled", "gates_failed": 2},
        {"at": "2026-11-29T10:00:00+00:00", "entries": ["a"], "stop_reason": "end_turn"},
    ]
    usage = usage_by_entry(records)
    assert usage["a"] == EntryUsage(
        turns=3, last_used="2026-12-01T10:00:00+00:00", failed_cell_turns=1, cancelled_turns=1,
        failed_gate_turns=1, rolled_back_turns=0, bad_turns=2,
    )  # fmt: skip
    assert usage["b"].turns == 1 and usage["b"].bad_turns == 1


def test_an_entry_tied_to_failures_is_marked_for_review_not_removed() -> None:
    bad = EntryUsage(turns=4, last_used=NOW.isoformat(), failed_cell_turns=3, bad_turns=3)
    assert bad.review_reason(created_at=None, now=NOW) == "tied to failures (3 of 4 turns went badly)"
    assert "**marked for review**: tied to failures" in describe(bad, created_at=None, now=NOW)
    fine = EntryUsage(turns=4, last_used=NOW.isoformat(), failed_cell_turns=1, bad_turns=1)
    assert fine.review_reason(created_at=None, now=NOW) is None
    too_few = EntryUsage(turns=2, last_used=NOW.isoformat(), bad_turns=2)
    assert too_few.review_reason(created_at=None, now=NOW) is None


def test_an_entry_unused_for_a_long_time_is_marked_for_review() -> None:
    old = (NOW - timedelta(days=45)).isoformat()
    assert EntryUsage(turns=2, last_used=old).review_reason(created_at=None, now=NOW) == "unused for 45 days"
    assert describe(None, created_at=old, now=NOW) == (
        "never in a prompt yet — **marked for review**: never in a prompt in 45 days"
    )
    assert describe(None, created_at=NOW.isoformat(), now=NOW) == "never in a prompt yet"


def test_the_harness_command_section_lists_each_entry_shown(tmp_path: Path) -> None:
    a, b = _entry("a"), _entry("b")
    UsageLedger(tmp_path).append(TurnUsage(entries=["a"], cells=1).record("s", "end_turn", at=NOW))
    section = usage_section(_overview(a, b), {"a": a, "b": b}, tmp_path, now=NOW)
    assert section.splitlines()[0] == "### Use in prompts"
    assert "- `a`: in the prompt for 1 turn, last 2026-12-01; no failures" in section
    assert "- `b`: never in a prompt yet — **marked for review**: never in a prompt in 30 days" in section


def test_a_turn_whose_refinement_a_user_rolled_back_counts_against_the_entries_it_showed(
    tmp_path: Path,
) -> None:
    from harness_store.models import Proposal

    home = tmp_path / "home"
    store = HarnessStore(home / "harness")
    seed = Proposal.model_validate(
        {"edits": [{"action": "create", "kind": "memory", "title": "Hint", "content": "A hint."}]}
    )
    store.apply(seed, scope="global", trigger="user")
    ledger = UsageLedger(home)
    # Turn 1 of session s showed the hint and, during it, wrote a refinement that a user rolled back.
    turn = TurnUsage(entries=["hint"], started=datetime.now(UTC) - timedelta(seconds=30))
    made = store.apply(
        Proposal.model_validate({"edits": [{"action": "create", "kind": "memory", "title": "Bad", "content": "x"}]}),
        scope="global", trigger="model", session_id="s",
    )  # fmt: skip
    ledger.append(turn.record("s", "end_turn"))
    ledger.append(TurnUsage(entries=["hint"]).record("s", "end_turn"))  # turn 2: nothing undone
    assert home_usage(home)["hint"].rolled_back_turns == 0
    store.rollback(made.id)
    usage = home_usage(home)["hint"]
    assert (usage.turns, usage.rolled_back_turns, usage.bad_turns) == (2, 1, 1)
    assert "1 whose refinement was rolled back" in describe(usage, created_at=None)
