"""Persistence: damaged files, malformed history, atomic saves, crash roll-forward, views, the lock."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest
from harness_edits import create, proposal, update

from harness_store import HarnessStore, HarnessStoreError, RefinementNotFound
from harness_store.lock import StoreLock

CORRUPT_SHAPES: dict[str, bytes] = {
    "empty file": b"",
    "whitespace": b"  \n",
    "truncated json": b'{"entries": {"memory": {"a": {"id": "a", ',
    "not utf-8": b"\xff\xfe\x00garbage",
    "json array": b"[1, 2, 3]",
    "json string": b'"harness"',
    "json null": b"null",
    "json number": b"42",
    "entries is a list": b'{"entries": []}',
    "kind is a string": b'{"entries": {"memory": "oops"}}',
    "entry missing fields": b'{"entries": {"memory": {"a": {"id": "a"}}}}',
    "tombstones wrong type": b'{"entries": {}, "tombstones": 7}',
}


@pytest.mark.parametrize("shape", sorted(CORRUPT_SHAPES))
def test_every_corrupt_state_shape_loads_as_empty_and_the_next_save_recovers(
    store: HarnessStore, shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    store.root.mkdir(parents=True)
    store.state_path.write_bytes(CORRUPT_SHAPES[shape])
    with caplog.at_level(logging.WARNING, logger="harness_store"):
        state = store.load()
    assert state.count() == 0 and state.tombstones == []
    assert caplog.records, "a damaged state file must be reported in the log"
    result = store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    assert result.applied
    raw = json.loads(store.state_path.read_text(encoding="utf-8"))
    assert list(raw["entries"]["memory"]) == ["a"]
    assert HarnessStore(store.root).load().get("memory", "a") is not None


def test_unreadable_state_path_loads_as_empty_with_a_warning_naming_it(
    store: HarnessStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.state_path.mkdir(parents=True)  # a directory where the file should be: reading fails
    with caplog.at_level(logging.WARNING, logger="harness_store"):
        assert store.load().count() == 0
    assert any(str(store.state_path) in record.getMessage() for record in caplog.records)


def test_missing_state_file_and_history_is_an_empty_harness(store: HarnessStore) -> None:
    assert store.load().count() == 0 and store.history() == []


def test_a_file_with_one_bad_entry_is_rebuilt_from_the_history_with_every_entry(store: HarnessStore) -> None:
    store.apply(
        proposal(create("memory", "A", "x"), create("memory", "B", "y")), scope="global", trigger="user"
    )
    raw = json.loads(store.state_path.read_text(encoding="utf-8"))
    raw["entries"]["memory"]["b"]["version"] = "not a number"
    store.state_path.write_text(json.dumps(raw), encoding="utf-8")
    state = HarnessStore(store.root).load()
    assert sorted(state.entries["memory"]) == ["a", "b"]


def test_malformed_history_lines_are_skipped_not_fatal(
    store: HarnessStore, caplog: pytest.LogCaptureFixture
) -> None:
    first = store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    with open(store.history_path, "ab") as handle:
        handle.write(b'this is not json\n{"id": "r-bad", "created_at": 5}\n[]\n\n')
    second = store.apply(proposal(create("memory", "B", "y")), scope="global", trigger="user")
    fresh = HarnessStore(store.root)
    with caplog.at_level(logging.WARNING, logger="harness_store"):
        assert [r.id for r in fresh.history()] == [first.id, second.id]
    assert caplog.records
    assert fresh.get_refinement("r-bad") is None
    assert fresh.rollback(second.id).applied


def test_a_torn_last_history_line_is_ignored_and_the_next_append_is_intact(store: HarnessStore) -> None:
    first = store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    with open(store.history_path, "ab") as handle:
        handle.write(b'{"id":"r-torn","summary":"half wr')
    assert [r.id for r in HarnessStore(store.root).history()] == [first.id]
    second = store.apply(proposal(create("memory", "B", "y")), scope="global", trigger="user")
    assert [r.id for r in HarnessStore(store.root).history()] == [first.id, second.id]


def test_atomic_save_leaves_no_temp_file_and_new_files_are_private(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    names = sorted(os.listdir(store.root))
    assert not [n for n in names if ".tmp-" in n]
    assert stat.S_IMODE(os.stat(store.state_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.history_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.root).st_mode) == 0o700


def test_save_keeps_the_mode_of_an_existing_state_file(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    os.chmod(store.state_path, 0o640)
    store.apply(proposal(create("memory", "B", "y")), scope="global", trigger="user")
    assert stat.S_IMODE(os.stat(store.state_path).st_mode) == 0o640


def test_stale_temp_files_of_a_killed_writer_are_removed_by_the_next_save(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    stale = store.root / ".harness_state.json.tmp-999999-deadbeef"
    stale.write_text("{", encoding="utf-8")
    store.apply(proposal(create("memory", "B", "y")), scope="global", trigger="user")
    assert not stale.exists()


def test_state_behind_history_after_a_crash_is_rolled_forward(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "A", "v1")), scope="global", trigger="user")
    saved = store.state_path.read_bytes()
    lost = store.apply(
        proposal(update("memory", "a", "A", "v2"), create("memory", "B", "bee")),
        scope="global",
        trigger="user",
    )
    # Simulate a crash after the history append but before the state rename.
    store.state_path.write_bytes(saved)
    fresh = HarnessStore(store.root)
    state = fresh.load()
    assert state.head == lost.id
    assert state.get("memory", "a").content == "v2" and state.get("memory", "b") is not None  # type: ignore[union-attr]
    follow = fresh.apply(proposal(update("memory", "b", "B", "b2")), scope="global", trigger="user")
    assert follow.applied, follow.errors


def test_missing_state_with_history_is_rebuilt_from_the_history(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "A", "v1")), scope="global", trigger="user")
    store.state_path.unlink()
    assert HarnessStore(store.root).load().get("memory", "a") is not None


def test_a_second_store_object_sees_writes_of_the_first(store: HarnessStore) -> None:
    other = HarnessStore(store.root)
    assert other.load().count() == 0
    result = store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    assert other.state.get("memory", "a") is not None
    assert other.get_refinement(result.id) == result
    assert [r.id for r in other.history(limit=1)] == [result.id]


def test_views_are_written_for_applied_entries_and_removed_on_delete(store: HarnessStore) -> None:
    store.apply(proposal(create("skill", "Plot", "plots data")), scope="global", trigger="user")
    path = store.view_path("skill", "plot")
    assert path == store.root / "view" / "global" / "skill" / "plot.md"
    text = path.read_text(encoding="utf-8")
    assert "# Plot" in text and "plots data" in text and "skills.demo" in text
    store.apply(proposal({"action": "delete", "kind": "skill", "id": "plot"}), scope="global", trigger="user")
    assert not path.exists()


def test_new_directories_are_private_down_from_the_first_missing_one(tmp_path: Path) -> None:
    local = HarnessStore(tmp_path / "home" / "sessions" / "s1" / "harness")
    local.apply(proposal(create("memory", "A", "x")), scope="local", trigger="model")
    for directory in (
        tmp_path / "home",
        tmp_path / "home" / "sessions",
        local.root,
        local.root / "view" / "local" / "memory",
    ):
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700, directory
    assert stat.S_IMODE(os.stat(local.view_path("memory", "a")).st_mode) == 0o600


def test_view_path_of_a_future_entry_uses_the_store_scope(tmp_path: Path) -> None:
    local = HarnessStore(tmp_path / "sessions" / "s1" / "harness")
    assert (
        local.view_path("memory", "new")
        == tmp_path / "sessions" / "s1" / "harness" / "view" / "local" / "memory" / "new.md"
    )


def test_lock_timeout_raises_a_store_error_naming_the_lock_path(store: HarnessStore) -> None:
    store.root.mkdir(parents=True)
    blocked = HarnessStore(store.root, lock_timeout=0.2)
    with StoreLock(store.lock_path), pytest.raises(HarnessStoreError, match=str(store.lock_path)):
        blocked.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    assert blocked.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user").applied


def test_a_root_that_is_a_file_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "harness").write_text("not a dir", encoding="utf-8")
    with pytest.raises(HarnessStoreError, match="harness"):
        HarnessStore(tmp_path / "harness").apply(
            proposal(create("memory", "A", "x")), scope="global", trigger="user"
        )


def test_threads_with_separate_store_objects_on_one_root_lose_nothing(store: HarnessStore) -> None:
    import threading

    errors: list[BaseException] = []

    def work(tag: str) -> None:
        mine = HarnessStore(store.root)
        try:
            for i in range(40):
                result = mine.apply(
                    proposal(create("memory", f"{tag} {i}", f"fact {tag} {i}")),
                    scope="global",
                    trigger="model",
                )
                assert result.applied, result.errors
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(tag,)) for tag in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert store.load().count() == 80
    assert len(store.history()) == 80


def test_history_limit_keeps_the_newest(store: HarnessStore) -> None:
    ids = [
        store.apply(proposal(create("memory", f"m{i}", "x")), scope="global", trigger="user").id
        for i in range(5)
    ]
    assert [r.id for r in store.history(limit=2)] == ids[-2:]
    assert [r.id for r in store.history()] == ids
    assert store.history(limit=0) == []
    assert [r.id for r in store.history(limit=50)] == ids


def test_history_pages_walk_back_with_a_cursor(store: HarnessStore) -> None:
    ids = [
        store.apply(proposal(create("memory", f"m{i}", "x")), scope="global", trigger="user").id
        for i in range(5)
    ]
    page, cursor = store.history_page(limit=2)
    assert [r.id for r in page] == ids[3:] and cursor == ids[3]
    page, cursor = store.history_page(limit=2, before=cursor)
    assert [r.id for r in page] == ids[1:3] and cursor == ids[1]
    page, cursor = store.history_page(limit=2, before=cursor)
    assert [r.id for r in page] == ids[:1] and cursor is None
    with pytest.raises(RefinementNotFound):
        store.history_page(before="r-unknown")


def test_an_unreadable_history_is_a_store_error_naming_it_but_load_still_works(
    store: HarnessStore,
) -> None:
    store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    store.history_path.unlink()
    store.history_path.mkdir()  # a directory where the file should be: reading fails
    fresh = HarnessStore(store.root)
    assert fresh.load().get("memory", "a") is not None
    with pytest.raises(HarnessStoreError, match=str(store.history_path)):
        fresh.history()


def test_a_filesystem_without_locks_is_a_store_error_and_leaks_no_descriptor(
    store: HarnessStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from harness_store import lock

    def no_locks(fd: int) -> bool:
        raise OSError(errno.ENOLCK, "No locks available")

    store.root.mkdir(parents=True)
    monkeypatch.setattr(lock, "_try_lock", no_locks)
    open_before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(HarnessStoreError, match=f"{store.lock_path}.*No locks available"):
        store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_a_failed_state_save_after_the_history_append_says_the_refinement_took_effect(
    store: HarnessStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness_store.statefile_backend as store_module

    def disk_full(path: Path, state: object) -> str:
        raise HarnessStoreError(f"cannot save the harness state {path}: No space left on device")

    monkeypatch.setattr(store_module, "save_state", disk_full)
    with pytest.raises(HarnessStoreError, match="do not apply it again") as raised:
        store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    [record] = HarnessStore(store.root).history()
    assert record.id in str(raised.value)
    monkeypatch.undo()
    assert HarnessStore(store.root).load().get("memory", "a") is not None  # rolled forward


def test_a_state_behind_history_warns_only_when_no_writer_is_mid_commit(
    store: HarnessStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.apply(proposal(create("memory", "A", "v1")), scope="global", trigger="user")
    saved = store.state_path.read_bytes()
    store.apply(proposal(update("memory", "a", "A", "v2")), scope="global", trigger="user")
    store.state_path.write_bytes(saved)  # as seen between another writer's append and its save

    def behind_warnings() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if "behind its history" in r.getMessage() and r.levelno >= logging.WARNING
        ]

    with caplog.at_level(logging.DEBUG, logger="harness_store"):
        with StoreLock(store.lock_path):  # the other writer, inside its commit
            assert HarnessStore(store.root).load().get("memory", "a").content == "v2"  # type: ignore[union-attr]
        assert behind_warnings() == []
        assert HarnessStore(store.root).load().get("memory", "a").content == "v2"  # type: ignore[union-attr]
        assert len(behind_warnings()) == 1  # nobody is filling the gap: a writer crashed


def test_the_state_file_after_writes_to_one_kind_at_a_time_is_the_whole_state_dump(tmp_path: Path) -> None:
    """Each kind's JSON is reused while its entries are (statefile.serialize): the saved bytes must
    still be exactly the dump of the whole current state, tombstones and head included."""
    from harness_store.statefile import FORMAT, peek_token

    store = HarnessStore(tmp_path / "h")
    store.apply(
        proposal(create("memory", "A", "alpha"), create("skill", "S", "does s")),
        scope="global",
        trigger="user",
    )
    store.apply(proposal(create("prompt", "P", "pee")), scope="global", trigger="user")
    rejected = store.apply(proposal(create("memory", "B", "beta")), scope="global", trigger="model")
    store.record_review(rejected.id, "reject")
    path = tmp_path / "h" / "harness_state.json"
    token = peek_token(path)
    assert token is not None
    state = store.load()
    expected = (
        b'{"format":%d,"save_token":"%s",' % (FORMAT, token.encode()) + state.model_dump_json().encode()[1:]
    )
    assert path.read_bytes() == expected
    assert state.tombstones and state.head == store.history()[-1].id
