"""The history index: cold lookups by binary search, incremental extension, safe fallbacks."""

from __future__ import annotations

import random
from pathlib import Path

from harness_store import RefinementResult
from harness_store.history import HistoryLog


def record_line(record_id: str, summary: str = "s") -> str:
    return (
        RefinementResult(
            id=record_id, summary=summary, created_at="2026-01-01T00:00:00.000Z"
        ).model_dump_json()
        + "\n"
    )


def ordered_ids(count: int, per_ms: int = 3) -> list[str]:
    # Several ids per millisecond, as two processes sharing a store produce.
    return [
        f"r-20260101-{(i // per_ms) // 1000 % 1000000:06d}{(i // per_ms) % 1000:03d}-{i:08x}"
        for i in range(count)
    ]


def test_cold_lookups_find_every_record_and_match_the_full_index(tmp_path: Path) -> None:
    path = tmp_path / "refinements.jsonl"
    ids = ordered_ids(3000)
    path.write_text(
        "".join(record_line(i, "x" * random.Random(i).randrange(0, 3000)) for i in ids), encoding="utf-8"
    )
    full = HistoryLog(path)
    full.refresh()
    for record_id in [*random.Random(1).sample(ids, 200), ids[0], ids[-1]]:
        cold = HistoryLog(path)
        assert cold._bisect(record_id) == full._offsets[record_id]
        found = cold.get(record_id)
        assert found is not None and found.id == record_id
        assert cold._scanned == 0, "a cold hit must not index the whole file"


def test_unknown_ids_are_not_found_cold_or_warm(tmp_path: Path) -> None:
    path = tmp_path / "refinements.jsonl"
    ids = ordered_ids(500)
    path.write_text("".join(record_line(i) for i in ids), encoding="utf-8")
    assert HistoryLog(path).get("r-20260101-000000100-ffffffff") is None
    assert HistoryLog(path).get("not-an-id") is None


def test_out_of_order_ids_fall_back_to_the_full_index(tmp_path: Path) -> None:
    path = tmp_path / "refinements.jsonl"
    ids = ordered_ids(400)
    shuffled = ids[:]
    random.Random(3).shuffle(shuffled)  # e.g. a clock that stepped back
    path.write_text("".join(record_line(i) for i in shuffled), encoding="utf-8")
    for record_id in ids[::37]:
        found = HistoryLog(path).get(record_id)
        assert found is not None and found.id == record_id


def test_malformed_lines_and_a_torn_tail_do_not_break_lookups(tmp_path: Path) -> None:
    path = tmp_path / "refinements.jsonl"
    ids = ordered_ids(300)
    lines = [record_line(i) for i in ids]
    lines.insert(150, "garbage line\n")
    path.write_text("".join(lines) + '{"id":"r-20260101-999999999-0', encoding="utf-8")
    for record_id in (ids[0], ids[149], ids[150], ids[-1]):
        found = HistoryLog(path).get(record_id)
        assert found is not None and found.id == record_id
    log = HistoryLog(path)
    assert log.ids() == ids and log.last_id() == ids[-1]


def test_the_index_extends_with_records_appended_by_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "refinements.jsonl"
    ids = ordered_ids(20)
    path.write_text("".join(record_line(i) for i in ids[:10]), encoding="utf-8")
    log = HistoryLog(path)
    assert len(log) == 10
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(record_line(i) for i in ids[10:]))
    assert log.ids() == ids
    found = log.get(ids[-1])
    assert found is not None and found.id == ids[-1]
