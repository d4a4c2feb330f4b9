"""A damaged state file is rebuilt from the history (the source of truth), never served empty.

The attack (issue 10, defect 1): apply m0..m4, damage `harness_state.json`, apply "new"; before the
fix the store then held only `new`. Every corruption kind, global and local stores.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from harness_edits import create, proposal

from harness_store import HarnessStore, local_root
from harness_store.models import HarnessState


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:40])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _array(path: Path) -> None:
    path.write_bytes(b"[1, 2, 3]")


def _wrong_shape(path: Path) -> None:
    path.write_bytes(b'{"entries": [], "tombstones": 7}')


def _not_utf8(path: Path) -> None:
    path.write_bytes(b"\xff\xfe\x00garbage")


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("x", encoding="utf-8")


CORRUPTIONS = {
    "truncated to 40 bytes": _truncate,
    "empty file": _empty,
    "json array": _array,
    "wrong shape": _wrong_shape,
    "not utf-8": _not_utf8,
    "a directory in its place": _directory,
}


def _store(tmp_path: Path, scope: str) -> HarnessStore:
    if scope == "local":
        return HarnessStore(local_root(tmp_path, "s-recovery"))
    return HarnessStore(tmp_path / "harness")


def _populate(store: HarnessStore, scope: str) -> None:
    """m0..m4 by the user, a reviewed-verified and a reviewed-rejected candidate, a rolled-back create."""
    for index in range(5):
        store.apply(
            proposal(create("memory", f"m{index}", f"memory number {index}")), scope=scope, trigger="user"
        )
    kept = store.apply(
        proposal(create("memory", "kept", "the model found this useful")), scope=scope, trigger="model"
    )
    store.record_review(kept.id, "apply")
    bad = store.apply(
        proposal(create("memory", "bad", "a wrong lesson to never learn")), scope=scope, trigger="model"
    )
    store.record_review(bad.id, "reject_forever")
    undone = store.apply(
        proposal(create("prompt", "undone", "a note that was rolled back")), scope=scope, trigger="user"
    )
    store.rollback(undone.id)


def _summary(state: HarnessState) -> tuple[dict[str, dict[str, str]], set[tuple[str, str, bool]]]:
    entries = {
        kind: {key: entry.trust for key, entry in items.items()} for kind, items in state.entries.items()
    }
    stones = {(stone.kind, stone.normalized, stone.forever) for stone in state.tombstones}
    return entries, stones


@pytest.mark.parametrize("scope", ["global", "local"])
@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_damaged_state_file_is_rebuilt_from_the_history_before_the_next_write(
    tmp_path: Path, scope: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store(tmp_path, scope)
    _populate(store, scope)
    before = _summary(HarnessStore(store.root).load())
    CORRUPTIONS[kind](store.state_path)
    writer = HarnessStore(store.root)
    with caplog.at_level(logging.WARNING, logger="harness_store"):
        assert writer.apply(
            proposal(create("memory", "new", "after the damage")), scope=scope, trigger="user"
        ).applied
    entries, stones = _summary(HarnessStore(store.root).load())
    expected_entries = {kind_: dict(items) for kind_, items in before[0].items()}
    expected_entries["memory"]["new"] = "verified"
    assert (entries, stones) == (expected_entries, before[1])
    assert any("rebuilt" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("scope", ["global", "local"])
@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_damaged_state_file_is_kept_aside_and_a_read_alone_serves_every_entry(
    tmp_path: Path, scope: str, kind: str
) -> None:
    store = _store(tmp_path, scope)
    _populate(store, scope)
    expected = _summary(HarnessStore(store.root).load())
    CORRUPTIONS[kind](store.state_path)
    assert _summary(HarnessStore(store.root).load()) == expected
    aside = [p.name for p in store.root.iterdir() if p.name.startswith("harness_state.json.damaged-")]
    assert len(aside) == 1 and store.state_path.is_file()


def test_the_rebuilt_tombstones_still_refuse_rejected_content(store: HarnessStore) -> None:
    bad = store.apply(
        proposal(create("memory", "bad", "a wrong lesson to never learn")), scope="global", trigger="model"
    )
    store.record_review(bad.id, "reject")
    store.state_path.write_bytes(b"")
    again = HarnessStore(store.root).apply(
        proposal(create("memory", "bad again", "A wrong lesson to  never learn")),
        scope="global",
        trigger="model",
    )
    assert again.applied_edits[0].error is not None and "tombstone" in again.applied_edits[0].error


def test_a_damaged_file_read_while_another_process_holds_the_lock_is_served_rebuilt_and_left_in_place(
    store: HarnessStore,
) -> None:
    from harness_store.lock import StoreLock

    store.apply(proposal(create("memory", "A", "x")), scope="global", trigger="user")
    store.state_path.write_bytes(b"[]")
    with StoreLock(store.lock_path):
        state = HarnessStore(store.root).load()
    assert list(state.entries["memory"]) == ["a"] and store.state_path.read_bytes() == b"[]"
