"""A damaged state file is rebuilt from the history (the source of truth), never served empty.

The attack: apply m0..m4, damage `harness_state.json`, apply "new"; before the
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


# Tombstones made outside an edit: `reject_proposal` and `lift_tombstone` are history
# records of their own, so a state rebuilt from the history keeps them.


def _stones(store: HarnessStore) -> set[tuple[str, str, bool]]:
    return {(t.kind, t.normalized, t.forever) for t in HarnessStore(store.root).load().tombstones}


@pytest.mark.parametrize("scope", ["global", "local"])
def test_a_proposal_rejected_forever_before_apply_keeps_its_tombstone_through_a_rebuild(
    tmp_path: Path, scope: str
) -> None:
    store = _store(tmp_path, scope)
    store.apply(proposal(create("memory", "kept", "a useful lesson")), scope=scope, trigger="user")
    [stone] = store.reject_proposal(proposal(create("memory", "Guess", "uses emacs")), forever=True)
    _truncate(store.state_path)
    rebuilt = HarnessStore(store.root)
    assert _stones(rebuilt) == {("memory", "uses emacs", True)}
    # Forever still blocks the id, whatever the content says.
    again = rebuilt.apply(proposal(create("memory", "Guess", "something else")), scope=scope, trigger="model")
    assert again.applied_edits[0].error == f"content was rejected before (tombstone {stone.id})"


@pytest.mark.parametrize("scope", ["global", "local"])
def test_a_lifted_tombstone_stays_lifted_through_a_rebuild(tmp_path: Path, scope: str) -> None:
    store = _store(tmp_path, scope)
    [stone] = store.reject_proposal(proposal(create("memory", "Guess", "uses emacs")))
    assert store.lift_tombstone(stone.id) == stone
    _empty(store.state_path)
    rebuilt = HarnessStore(store.root)
    assert _stones(rebuilt) == set()
    assert rebuilt.apply(
        proposal(create("memory", "Guess", "uses emacs")), scope=scope, trigger="model"
    ).applied


def test_a_lifted_review_tombstone_stays_lifted_though_the_rebuild_derives_it_under_a_new_id(
    store: HarnessStore,
) -> None:
    bad = store.apply(proposal(create("memory", "bad", "a wrong lesson")), scope="global", trigger="model")
    store.record_review(bad.id, "reject")
    [stone] = store.tombstones()
    store.lift_tombstone(stone.id)
    _array(store.state_path)
    assert _stones(store) == set()


def test_content_rejected_again_after_a_lift_is_tombstoned_again_after_a_rebuild(store: HarnessStore) -> None:
    pending = proposal(create("memory", "Guess", "uses emacs"))
    [stone] = store.reject_proposal(pending)
    store.lift_tombstone(stone.id)
    store.reject_proposal(pending)
    _wrong_shape(store.state_path)
    assert _stones(store) == {("memory", "uses emacs", False)}


def test_upgrading_a_rejection_to_forever_survives_a_rebuild(store: HarnessStore) -> None:
    pending = proposal(create("memory", "Guess", "uses emacs"))
    store.reject_proposal(pending)
    assert store.reject_proposal(pending, forever=True) == []  # not a new tombstone, an upgrade
    _truncate(store.state_path)
    assert _stones(store) == {("memory", "uses emacs", True)}


def test_a_tombstone_record_the_state_file_missed_is_rolled_forward(store: HarnessStore) -> None:
    # A writer killed between the history append and the state save: the state is one record behind.
    store.apply(proposal(create("memory", "kept", "a useful lesson")), scope="global", trigger="user")
    behind = store.state_path.read_bytes()
    store.reject_proposal(proposal(create("memory", "Guess", "uses emacs")))
    store.state_path.write_bytes(behind)
    assert _stones(store) == {("memory", "uses emacs", False)}


def test_records_without_tombstone_changes_keep_their_shape_on_disk(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "kept", "a useful lesson")), scope="global", trigger="user")
    [line] = store.history_path.read_text(encoding="utf-8").splitlines()
    assert ('"tombstoned"' in line, '"lifted"' in line) == (False, False)
