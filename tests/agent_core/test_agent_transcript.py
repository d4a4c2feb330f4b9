"""SessionStore: append-only JSONL transcripts, load, list by cwd with paging, delete."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from agent_core import events as ev
from agent_core.history.transcript import SessionStore


def _store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "home")


def test_round_trip_rebuilds_the_same_model_context_and_replay_events(tmp_path: Path) -> None:
    store = _store(tmp_path)
    writer = store.create("s1", str(tmp_path))
    messages = [
        {"role": "user", "content": "hello"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ipython", "arguments": '{"code": "1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "assistant", "content": "done"},
    ]
    events: list[ev.TurnEvent] = [
        ev.UserMessage((ev.TextPart("hello"), ev.ImagePart("aGk=", "image/png")), "m1"),
        ev.CellStarted("c1", "1", "one"),
        ev.CellDisplay("c1", {"text/plain": "1"}, is_result=True),
        ev.CellFinished("c1", "completed", output="1"),
        ev.MessageChunk("done", "m2"),
        ev.PlanChanged((ev.PlanEntry("step", "completed"),)),
        ev.RefinementReported("r1", "remember x", "local", ({"action": "create"},)),
        ev.TurnEnded("end_turn"),
    ]
    for message in messages:
        writer.message(message)
    for event in events:
        writer.event(event)
    writer.append({"type": "title", "title": "Hello"})
    writer.append({"type": "config", "key": "mode", "value": "ask"})
    writer.close()

    loaded = store.load("s1")
    assert loaded.messages == messages
    assert loaded.events == events
    assert loaded.title == "Hello" and loaded.config == {"mode": "ask"}
    assert loaded.cwd == str(tmp_path.resolve())


def test_compaction_record_restarts_the_context_from_its_messages(tmp_path: Path) -> None:
    store = _store(tmp_path)
    writer = store.create("s1", str(tmp_path))
    writer.message({"role": "user", "content": "old"})
    writer.append(
        {"type": "compaction", "summary": "S", "messages": [{"role": "user", "content": "summary S"}]}
    )
    writer.message({"role": "user", "content": "new"})
    writer.close()
    loaded = store.load("s1")
    assert loaded.messages == [{"role": "user", "content": "summary S"}, {"role": "user", "content": "new"}]
    assert loaded.compactions == 1


def test_torn_last_line_is_ignored_and_cut_before_the_next_append(tmp_path: Path) -> None:
    store = _store(tmp_path)
    writer = store.create("s1", str(tmp_path))
    writer.message({"role": "user", "content": "kept"})
    writer.close()
    path = store.transcript_path("s1")
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"type":"message","message":{"role":"user","con')  # a crash mid-write
    assert store.load("s1").messages == [{"role": "user", "content": "kept"}]

    writer = store.open("s1")
    writer.message({"role": "user", "content": "after"})
    writer.close()
    loaded = store.load("s1")
    assert loaded.messages == [{"role": "user", "content": "kept"}, {"role": "user", "content": "after"}]
    assert loaded.skipped_lines == 0
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_malformed_middle_line_is_skipped_and_counted(tmp_path: Path) -> None:
    store = _store(tmp_path)
    writer = store.create("s1", str(tmp_path))
    writer.message({"role": "user", "content": "a"})
    writer.append({"type": "event", "event": {"kind": "NoSuchEvent"}})
    writer.message({"role": "user", "content": "b"})
    writer.close()
    loaded = store.load("s1")
    assert [m["content"] for m in loaded.messages] == ["a", "b"]
    assert loaded.skipped_lines == 1


def test_each_line_is_on_disk_as_soon_as_it_is_appended(tmp_path: Path) -> None:
    store = _store(tmp_path)
    writer = store.create("s1", str(tmp_path))
    writer.message({"role": "user", "content": "flushed"})
    # Read through a separate file handle while the writer is still open.
    assert "flushed" in store.transcript_path("s1").read_text()
    writer.close()


def test_files_are_0600_and_directories_0700(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create("s1", str(tmp_path)).close()
    session_dir = store.session_dir("s1")
    for directory in (store.home, store.root, session_dir):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    for file in session_dir.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file


def test_list_by_cwd_newest_first_with_cursor_paging(tmp_path: Path) -> None:
    store = _store(tmp_path)
    project, other = tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    base, OLD = 1_700_000_000, "2020-01-01T00:00:00.000Z"
    for i in (3, 0, 6, 1, 5, 2, 4):  # creation order differs from activity order
        store.create(f"p{i}", str(project)).close()
        store.write_meta(f"p{i}", cwd=str(project.resolve()), title=f"t{i}", created_at=OLD, updated_at=OLD)
        os.utime(store.transcript_path(f"p{i}"), (base + i * 60, base + i * 60))  # the last activity
    store.create("o1", str(other)).close()

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = store.list(str(project), cursor, limit=3)
        seen += [s.session_id for s in page.sessions]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"p{i}" for i in reversed(range(7))]
    assert pages == 3
    assert store.list(str(project) + "/").sessions[0].title == "t6"  # the path is resolved
    assert store.list(str(project)).sessions[0].updated_at == "2023-11-14T22:19:20.000Z"
    assert {s.session_id for s in store.list(None).sessions} == {*(f"p{i}" for i in range(7)), "o1"}


def test_bad_cursor_is_a_readable_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="invalid session list cursor"):
        _store(tmp_path).list(None, cursor="%%%")


def test_list_falls_back_to_the_header_when_meta_is_damaged(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create("s1", str(tmp_path)).close()
    (store.session_dir("s1") / "meta.json").write_text("{not json")
    [summary] = store.list(str(tmp_path)).sessions
    assert summary.session_id == "s1" and summary.cwd == str(tmp_path.resolve())


def test_delete_is_idempotent(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create("s1", str(tmp_path)).close()
    assert store.delete("s1") is True
    assert store.delete("s1") is False
    assert not store.exists("s1")


def test_session_ids_cannot_escape_the_sessions_directory(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for bad in ("../x", "a/b", ".hidden", ""):
        with pytest.raises(ValueError, match="invalid session id"):
            store.session_dir(bad)
        assert store.exists(bad) is False


def test_transcript_without_header_is_refused_readably(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create("s1", str(tmp_path)).close()
    path = store.transcript_path("s1")
    os.truncate(path, 0)
    with pytest.raises(ValueError, match="is damaged: its first line is not a valid session header"):
        store.load("s1")
