"""`session/list` reads one index file, and the directory stays the authority: a corrupt, stale or
foreign index is rebuilt and never hides a session; a renamed or deleted session shows as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_core.history.session_index import INDEX
from agent_core.history.transcript import SessionStore


def _ids(store: SessionStore) -> set[str]:
    return {s.session_id for s in store.list(None, None, 100).sessions}


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    store = SessionStore(tmp_path)
    for i in range(5):
        store.create(f"sess_{i}", str(tmp_path)).close()
    return store


def test_listing_writes_an_index_and_lists_from_it_without_reading_meta_files(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _ids(store) == {f"sess_{i}" for i in range(5)}
    index = json.loads((store.root / INDEX).read_text())
    assert set(index["sessions"]) == {f"sess_{i}" for i in range(5)}
    assert (store.root / INDEX).stat().st_mode & 0o777 == 0o600

    def no_reads(session_id: str) -> None:
        raise AssertionError(f"meta of {session_id} read although the index is current")

    monkeypatch.setattr(store, "read_meta", no_reads)
    assert _ids(store) == {f"sess_{i}" for i in range(5)}


@pytest.mark.parametrize("damage", ["{not json", '{"version": 99, "sessions": {}}', '["a list"]', ""])
def test_a_corrupt_or_foreign_index_is_rebuilt_and_loses_no_session(store: SessionStore, damage: str) -> None:
    _ids(store)
    (store.root / INDEX).write_text(damage)
    assert _ids(store) == {f"sess_{i}" for i in range(5)}
    assert set(json.loads((store.root / INDEX).read_text())["sessions"]) == {f"sess_{i}" for i in range(5)}


def test_a_stale_index_shows_new_renamed_and_deleted_sessions_as_they_are(
    store: SessionStore, tmp_path: Path
) -> None:
    _ids(store)
    store.create("sess_new", str(tmp_path)).close()  # another process made it after the index
    meta = store.read_meta("sess_1")
    assert meta is not None
    store.write_meta(
        "sess_1",
        cwd=meta["cwd"],
        title="renamed elsewhere",
        created_at=meta["created_at"],
        updated_at=meta["updated_at"],
    )
    store.delete("sess_2")
    page = {s.session_id: s for s in store.list(None, None, 100).sessions}
    assert set(page) == {"sess_0", "sess_1", "sess_3", "sess_4", "sess_new"}
    assert page["sess_1"].title == "renamed elsewhere"
    assert "sess_2" not in json.loads((store.root / INDEX).read_text())["sessions"]


def test_a_session_without_a_meta_file_is_listed_from_its_header_every_time(store: SessionStore) -> None:
    (store.session_dir("sess_3") / "meta.json").unlink()
    assert "sess_3" in _ids(store)
    assert "sess_3" in _ids(store)  # not cached as if it had a meta file
    assert "sess_3" not in json.loads((store.root / INDEX).read_text())["sessions"]
