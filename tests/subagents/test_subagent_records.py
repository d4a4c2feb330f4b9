"""Child records, their file on disk, and what a restart makes of them."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from agent_core.subagents import persistence
from agent_core.subagents.records import Budget, ChildRecord, Message


def record(state: str = "running", **fields: object) -> ChildRecord:
    base: dict[str, object] = dict(
        session_id="sess_child", parent_id="sess_parent", name="tests", task="run the tests", depth=1
    )
    base.update(fields)
    made = ChildRecord(**base)  # type: ignore[arg-type]
    made.state = state  # type: ignore[assignment]
    return made


def test_a_record_round_trips_through_its_json_form() -> None:
    original = record("finished", answer="all pass", budget=Budget(tokens=500, seconds=30.0), messages_sent=2)
    assert ChildRecord.from_json(json.loads(json.dumps(original.to_json()))) == original


@pytest.mark.parametrize("bad", [[], {"name": "x"}, {**record().to_json(), "state": "exploded"}])
def test_a_malformed_record_is_refused_with_a_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        ChildRecord.from_json(bad)


def test_saved_record_is_private_and_loads_back(tmp_path: Path) -> None:
    saved = record()
    persistence.save(tmp_path, saved)
    assert stat.S_IMODE((tmp_path / "subagent.json").stat().st_mode) == 0o600
    assert persistence.load(tmp_path) == saved
    assert [p.name for p in tmp_path.iterdir()] == ["subagent.json"]  # no temp file left behind


def test_a_damaged_record_file_is_skipped_by_the_scan(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    persistence.save(tmp_path / "a", record(session_id="a"))
    (tmp_path / "b" / "subagent.json").write_text("{not json")
    assert [r.session_id for r in persistence.scan(tmp_path)] == ["a"]


@pytest.mark.parametrize("state", ["queued", "running"])
def test_an_active_child_found_after_a_restart_is_interrupted_by_restart(state: str) -> None:
    found = record(state)
    assert persistence.after_restart(found)
    assert found.state == "interrupted"
    assert found.reason is not None and found.reason.startswith("interrupted by restart")


@pytest.mark.parametrize("state", ["finished", "failed", "cancelled", "idle"])
def test_a_child_that_had_ended_keeps_its_state_after_a_restart(state: str) -> None:
    found = record(state)
    assert not persistence.after_restart(found)
    assert found.state == state


def test_a_final_message_says_it_is_final_and_whether_the_child_also_sent_messages() -> None:
    final = Message(
        "tests", "sess_child", "sess_parent", "done", kind="final", state="finished", sent_messages=True
    )
    body = final.to_json()
    assert (body["final"], body["state"], body["sent_messages"], body["from"]) == (
        True,
        "finished",
        True,
        "tests",
    )
    assert "final" not in Message("tests", "sess_child", "sess_parent", "hi").to_json()
