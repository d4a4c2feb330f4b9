"""Counters on every harness entry: shown, followed by a cell, how the followed turns went, kept
beside the usage ledger and rebuilt from it, and the prompt's order they drive."""

from __future__ import annotations

import json
from pathlib import Path

from agent_core import events as ev
from agent_core.trust import entry_counters
from agent_core.trust.entry_counters import (
    CounterFile,
    EntryCounters,
    fold,
    home_counters,
    lookup,
    overview_anchors,
    prompt_order,
)
from agent_core.trust.entry_usage import TurnUsage, UsageLedger
from harness_store import HarnessState, render_overview
from harness_store.models import HarnessEntry

STAMP = "2026-11-01T00:00:00+00:00"


def _entry(entry_id: str, content: str, kind: str = "memory", **extra: object) -> HarnessEntry:
    return HarnessEntry(
        id=entry_id, kind=kind, title=f"Title of {entry_id}", content=content, scope="global",
        created_at=STAMP, updated_at=STAMP, **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def _overview(*entries: HarnessEntry, order: dict[str, int] | None = None, per_kind: int = 20) -> str:
    by_kind: dict[str, dict[str, HarnessEntry]] = {}
    for entry in entries:
        by_kind.setdefault(entry.kind, {})[entry.id] = entry
    from harness_store import OverviewBudget

    budget = OverviewBudget(entries_per_kind=per_kind)
    return str(render_overview(HarnessState.build(by_kind), order=order, budget=budget))


def test_anchors_are_the_backticked_commands_paths_and_a_skills_callable() -> None:
    skill = _entry(
        "runner", "Runs the checks.", kind="skill",
        reference={"type": "python", "import": "tools.checks", "callable": "run_checks"}, arguments={},
    )  # fmt: skip
    memo = _entry("tests", "Run `make check` before committing; config in tools/ci.toml.")
    anchors = overview_anchors(_overview(skill, memo))
    assert anchors == {"runner": ["run_checks("], "tests": ["make check", "tools/ci.toml"]}


def test_a_turn_marks_an_entry_followed_only_when_a_later_cell_runs_its_anchor() -> None:
    usage = TurnUsage()
    usage.saw(_overview(_entry("tests", "Run `make check`."), _entry("lint", "Run `ruff check .`.")))
    usage.note(ev.CellStarted("c1", "import subprocess\nsubprocess.run('make check', shell=True)", ""))
    usage.note(ev.CellStarted("c2", "print('ruff')", ""))
    record = usage.record("s", "end_turn")
    assert record["followed"] == ["tests"]
    assert record["entries"] == ["tests", "lint"]


def _turn(at: str, entries: list[str], followed: list[str], **outcome: object) -> dict[str, object]:
    return {"at": at, "session": "s", "entries": entries, "followed": followed, **outcome}


def test_fold_counts_shown_followed_and_the_outcome_of_followed_turns_only() -> None:
    records = [
        _turn("2026-11-01T10:00:00+00:00", ["a", "b"], ["a"]),
        _turn("2026-11-02T10:00:00+00:00", ["a", "b"], ["a"], gates_failed=1),
        _turn("2026-11-03T10:00:00+00:00", ["a", "b"], ["a"], cells_failed=2),
        _turn("2026-11-04T10:00:00+00:00", ["b"], [], gates_failed=1),  # b shown, not followed
        _turn("2026-11-05T10:00:00+00:00", ["a"], ["a"]),
    ]
    counted = fold(records, rolled_back={4})
    a = counted["a"]
    assert (a.shown, a.followed, a.passed, a.failed) == (4, 4, 1, 3)
    assert (a.failed_gates, a.failed_cells, a.rolled_back) == (1, 1, 1)
    assert a.standing == "harmful" and a.last_shown == "2026-11-05T10:00:00+00:00"
    b = counted["b"]
    assert (b.shown, b.followed, b.failed) == (4, 0, 0) and b.standing == "neutral"


def test_standing_helpful_harmful_and_unfollowed() -> None:
    assert EntryCounters(shown=3, followed=2, passed=2).standing == "helpful"
    assert EntryCounters(shown=3, followed=3, passed=1, failed=2).standing == "harmful"
    assert EntryCounters(shown=1, followed=1, failed=1).standing == "neutral"  # one failure is not a verdict
    assert EntryCounters(shown=entry_counters.UNFOLLOWED_AFTER).standing == "unfollowed"


def test_the_prompt_lists_helpful_entries_first_and_demotes_harmful_ones_out_of_a_full_kind() -> None:
    entries = [_entry(name, f"Note {name} says something.") for name in ("a", "b", "c")]
    plain = _overview(*entries, per_kind=2)
    assert [k for k in overview_anchors(plain)] == ["c", "b"]  # newest by id when equal
    ordered = _overview(*entries, order={"a": 0, "c": 2}, per_kind=2)
    # a (helpful) comes first; c (harmful) is cut from the two slots, b takes its place.
    assert list(overview_anchors(ordered)) == ["a", "b"]


def test_lookup_prefers_a_scoped_key_for_a_colliding_local_entry() -> None:
    counted = {"x": EntryCounters(shown=1), "local:x": EntryCounters(shown=5)}
    assert lookup(counted, "x", "local").shown == 5
    assert lookup(counted, "x", "global").shown == 1
    assert lookup(counted, "y", "global").shown == 0


def test_counters_are_kept_beside_the_ledger_refolded_when_it_grows_and_rebuilt_after_damage(
    tmp_path: Path,
) -> None:
    ledger = UsageLedger(tmp_path)
    ledger.append(_turn("2026-11-01T10:00:00+00:00", ["a"], ["a"]))
    entry_counters._MEMO.clear()
    assert home_counters(tmp_path)["a"].passed == 1
    stored = CounterFile(tmp_path).read()
    assert stored is not None and stored[1]["a"].followed == 1
    ledger.append(_turn("2026-11-02T10:00:00+00:00", ["a"], ["a"], gates_failed=1))
    assert home_counters(tmp_path)["a"].failed == 1  # the ledger grew: refolded
    CounterFile(tmp_path).path.write_text('{"sources": ', encoding="utf-8")  # damaged
    entry_counters._MEMO.clear()
    again = home_counters(tmp_path)["a"]
    assert (again.shown, again.passed, again.failed) == (2, 1, 1)
    assert json.loads(CounterFile(tmp_path).path.read_text())["counters"]["a"]["failed"] == 1


def test_a_stored_file_is_trusted_only_while_its_sources_are_unchanged(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path)
    ledger.append(_turn("2026-11-01T10:00:00+00:00", ["a"], ["a"]))
    entry_counters._MEMO.clear()
    home_counters(tmp_path)
    path = CounterFile(tmp_path).path
    forged = json.loads(path.read_text())
    forged["counters"]["a"]["passed"] = 99
    path.write_text(json.dumps(forged))
    entry_counters._MEMO.clear()
    assert home_counters(tmp_path)["a"].passed == 99  # sources match: the kept counters are used
    forged["sources"] = {k: v + 1 for k, v in forged["sources"].items()}
    path.write_text(json.dumps(forged))
    entry_counters._MEMO.clear()
    assert home_counters(tmp_path)["a"].passed == 1  # stale: refolded from the ledger


def test_prompt_order_ranks_only_helpful_and_harmful() -> None:
    counted = {
        "good": EntryCounters(shown=2, followed=2, passed=2),
        "bad": EntryCounters(shown=3, followed=3, failed=3),
        "meh": EntryCounters(shown=1),
    }
    assert prompt_order(counted) == {"good": 0, "bad": 2}


def test_a_turn_checks_the_predictions_it_started_with_when_a_cell_runs_their_command() -> None:
    usage = TurnUsage(entries=["tests"])
    usage.expect({"tests": "make check"})
    usage.expect({"tests": "make check", "late": "tox"})  # a write mid-turn is for later turns
    usage.note(ev.CellStarted("c1", "!tox && make check", ""))
    assert usage.record("s", "end_turn")["predicted"] == ["tests"]


def test_fold_counts_a_prediction_hit_when_the_turn_passed_and_a_miss_when_it_failed() -> None:
    records = [
        _turn("2026-11-01T10:00:00+00:00", ["a"], [], predicted=["a"]),
        _turn("2026-11-02T10:00:00+00:00", ["a"], [], predicted=["a"], gates_failed=1),
        _turn("2026-11-03T10:00:00+00:00", ["a"], [], predicted=["a"]),
    ]
    a = fold(records)["a"]
    assert (a.hits, a.misses) == (2, 1)
    assert a.describe().endswith("; prediction: 2 hits, 1 miss")


def test_turns_appended_later_are_folded_in_alone_and_match_a_full_refold(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path)
    ledger.append(_turn("2026-11-01T10:00:00+00:00", ["a", "b"], ["a"]))
    entry_counters._MEMO.clear()
    home_counters(tmp_path)
    ledger.append(_turn("2026-11-02T10:00:00+00:00", ["a"], ["a"], gates_failed=1, predicted=["a"]))
    with ledger.path.open("a") as fh:
        fh.write('{"entries": ["a"], "at": "2026-')  # a turn being written: left for later
    grown = home_counters(tmp_path)
    full = entry_counters.rebuild(tmp_path)[1]
    assert {k: v.to_json() for k, v in grown.items()} == {k: v.to_json() for k, v in full.items()}
    assert grown["a"].shown == 2 and grown["a"].misses == 1


def test_a_history_that_changed_makes_the_counters_refold_with_its_rollbacks(tmp_path: Path) -> None:
    from harness_store import HarnessStore

    store = HarnessStore(tmp_path / "harness")
    made = store.apply(
        {"edits": [{"action": "create", "kind": "memory", "title": "T", "content": "Run `tox`."}]},
        scope="global",
        trigger="model",
        session_id="s",
    )
    ledger = UsageLedger(tmp_path)
    turn = _turn(made.created_at, ["a"], ["a"])
    turn["started"] = "2026-01-01T00:00:00+00:00"
    turn["at"] = "2099-01-01T00:00:00+00:00"
    ledger.append(turn)
    entry_counters._MEMO.clear()
    assert home_counters(tmp_path)["a"].passed == 1
    store.rollback(made.id)
    assert home_counters(tmp_path)["a"].rolled_back == 1  # the turn's refinement was undone


def test_a_turn_the_next_prompt_corrected_counts_as_failed_for_the_entries_it_followed() -> None:
    first = _turn("2026-11-01T10:00:00+00:00", ["a", "b"], ["a"], started="2026-11-01T09:59:00+00:00")
    other = {**first, "session": "t"}  # another session's turn with the same stamp: not corrected
    fix = _turn("2026-11-01T10:05:00+00:00", [], [], corrects="2026-11-01T09:59:00+00:00")
    counted = fold([first, other, fix])
    a = counted["a"]
    assert (a.shown, a.followed, a.passed, a.failed, a.corrected) == (2, 2, 1, 1, 1)
    assert "1 corrected by the user" in a.describe()
    assert counted["b"].corrected == 0  # shown, not followed: the correction says nothing about it
    second = _turn("2026-11-02T10:00:00+00:00", ["a"], ["a"], started="2026-11-02T09:59:00+00:00")
    again = _turn("2026-11-02T10:05:00+00:00", ["a"], [], corrects="2026-11-02T09:59:00+00:00")
    assert fold([first, fix, second, again])["a"].standing == "harmful"


def test_a_correction_appended_later_refolds_the_turn_it_corrects(tmp_path: Path) -> None:
    ledger = UsageLedger(tmp_path)
    ledger.append(_turn("2026-11-01T10:00:00+00:00", ["a"], ["a"], started="2026-11-01T09:59:00+00:00"))
    entry_counters._MEMO.clear()
    assert home_counters(tmp_path)["a"].passed == 1
    # a correcting turn with no entry shown is still written: it is about the previous turn
    usage = TurnUsage(corrects="2026-11-01T09:59:00+00:00")
    ledger.append(usage.record("s", "end_turn"))
    grown = home_counters(tmp_path)["a"]
    assert (grown.passed, grown.failed, grown.corrected) == (0, 1, 1)
