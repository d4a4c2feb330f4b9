"""Rollback (field-for-field, conflicts, across sessions), review decisions, tombstones, as-of view."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_edits import create, delete, proposal, update

from harness_store import HarnessEntry, HarnessStore, RefinementNotFound, render_overview

SKILL = create(
    "skill",
    "Summarize CSV",
    "Reads a CSV and prints column stats",
    path="data",
    metadata={"owner": "me"},
    reference={"type": "python", "import": "skills.csv_stats", "callable": "summarize"},
    arguments={"path": {"type": "string"}, "limit": {"type": "integer"}},
)
RESTORED = ("kind", "title", "content", "path", "scope", "reference", "arguments", "metadata", "trust")


def _fields(entry: HarnessEntry | None) -> dict[str, object]:
    assert entry is not None
    return {name: getattr(entry, name) for name in RESTORED}


def test_rollback_of_create_deletes_the_entry_and_can_itself_be_rolled_back(store: HarnessStore) -> None:
    created = store.apply(proposal(SKILL), scope="local", trigger="user")
    original = store.state.get("skill", "summarize_csv")
    undo = store.rollback(created.id)
    assert undo.rollback_of == created.id and undo.trigger == "rollback"
    assert store.state.get("skill", "summarize_csv") is None
    redo = store.rollback(undo.id)
    assert redo.applied, redo.errors
    assert _fields(store.state.get("skill", "summarize_csv")) == _fields(original)


def test_rollback_of_update_restores_the_before_snapshot_field_for_field(store: HarnessStore) -> None:
    store.apply(proposal(SKILL), scope="local", trigger="user")
    before = store.state.get("skill", "summarize_csv")
    changed = store.apply(
        proposal(
            update(
                "skill",
                "summarize_csv",
                "CSV stats v2",
                "new body",
                path="other",
                metadata={},
                reference={"type": "python", "import": "skills.v2", "callable": "go"},
                arguments={},
            )
        ),
        scope="local",
        trigger="model",
    )
    store.rollback(changed.id)
    after = store.state.get("skill", "summarize_csv")
    assert _fields(after) == _fields(before)
    assert (
        after is not None
        and before is not None
        and after.version == 3
        and after.updated_at >= before.updated_at
    )


def test_rollback_restores_deleted_skill_with_its_reference(store: HarnessStore) -> None:
    store.apply(proposal(SKILL), scope="local", trigger="user")
    before = store.state.get("skill", "summarize_csv")
    deleted = store.apply(proposal(delete("skill", "summarize_csv")), scope="local", trigger="model")
    store.rollback(deleted.id)
    assert _fields(store.state.get("skill", "summarize_csv")) == _fields(before)


def test_rollback_of_a_proposal_that_edited_one_entry_twice(store: HarnessStore) -> None:
    result = store.apply(
        proposal(create("memory", "A", "v1"), update("memory", "a", "A", "v2")),
        scope="local",
        trigger="model",
    )
    undo = store.rollback(result.id)
    assert undo.applied and not undo.errors
    assert store.state.get("memory", "a") is None


def test_rollback_conflict_names_the_later_refinement_and_changes_nothing(store: HarnessStore) -> None:
    first = store.apply(
        proposal(create("memory", "A", "v1"), create("memory", "B", "bee")), scope="local", trigger="model"
    )
    later = store.apply(proposal(update("memory", "a", "A", "v2")), scope="local", trigger="model")
    refused = store.rollback(first.id)
    assert not refused.applied
    messages = {e.id: e.error for e in refused.applied_edits}
    assert messages["a"] == f"entry changed since refinement {first.id}; roll back {later.id} first"
    assert messages["b"] == "rollback refused: another edit of this refinement conflicts"
    assert store.state.get("memory", "b") is not None


def test_forced_rollback_overrides_the_conflict(store: HarnessStore) -> None:
    first = store.apply(proposal(create("memory", "A", "v1")), scope="local", trigger="model")
    store.apply(proposal(update("memory", "a", "A", "v2")), scope="local", trigger="model")
    forced = store.rollback(first.id, force=True)
    assert forced.applied
    assert store.state.get("memory", "a") is None


def test_rolling_back_newest_first_never_conflicts(store: HarnessStore) -> None:
    results = [store.apply(proposal(create("memory", "A", "v1")), scope="local", trigger="model")]
    for n in range(2, 5):
        results.append(
            store.apply(proposal(update("memory", "a", "A", f"v{n}")), scope="local", trigger="model")
        )
    for result in reversed(results):
        assert not store.rollback(result.id).errors
    assert store.state.get("memory", "a") is None


def test_rollback_across_sessions_from_the_global_history(tmp_path: Path) -> None:
    root = tmp_path / "home" / "harness"
    result = HarnessStore(root).apply(
        proposal(create("prompt", "Style", "short answers")), scope="global", trigger="user"
    )
    # A later session (a new process would build a new store object) finds it in refinements.jsonl.
    later_session = HarnessStore(root)
    assert later_session.get_refinement(result.id) == result
    undo = later_session.rollback(result.id)
    assert undo.applied and later_session.state.get("prompt", "style") is None


def test_rollback_of_unknown_refinement_raises_not_found(store: HarnessStore) -> None:
    with pytest.raises(RefinementNotFound, match="no refinement r-missing"):
        store.rollback("r-missing")


def test_rolling_back_a_create_records_a_tombstone_that_refuses_recreation_by_the_model(
    store: HarnessStore,
) -> None:
    created = store.apply(
        proposal(create("memory", "Tabs", "Always indent with tabs")), scope="local", trigger="model"
    )
    store.rollback(created.id)
    [stone] = store.tombstones()
    again = store.apply(
        proposal(create("memory", "Indent", "  ALWAYS indent   with TABS ")), scope="local", trigger="model"
    )
    assert again.applied_edits[0].error == f"content was rejected before (tombstone {stone.id})"


def test_tombstone_catches_near_duplicates_but_not_new_content(store: HarnessStore) -> None:
    text = "Run the test suite with pytest -q before every commit and read the failures carefully."
    created = store.apply(proposal(create("memory", "Tests", text)), scope="local", trigger="model")
    store.rollback(created.id)
    near = store.apply(
        proposal(create("memory", "T2", text.replace("carefully.", "carefully!"))),
        scope="local",
        trigger="model",
    )
    assert near.applied_edits[0].error is not None and near.applied_edits[0].error.startswith(
        "content was rejected before"
    )
    fresh = store.apply(
        proposal(create("memory", "T3", "Use ruff format on save.")), scope="local", trigger="model"
    )
    assert fresh.applied_edits[0].applied
    other_kind = store.apply(proposal(create("prompt", "T4", text)), scope="local", trigger="model")
    assert other_kind.applied_edits[0].applied


def test_user_edits_pass_tombstones_and_lifting_reopens_them_to_the_model(store: HarnessStore) -> None:
    created = store.apply(
        proposal(create("memory", "Tabs", "indent with tabs")), scope="local", trigger="model"
    )
    store.rollback(created.id)
    assert store.apply(
        proposal(create("memory", "Tabs", "indent with tabs")), scope="local", trigger="user"
    ).applied
    store.apply(proposal(delete("memory", "tabs")), scope="local", trigger="user")
    [stone] = store.tombstones()
    assert store.lift_tombstone(stone.id) == stone
    assert store.tombstones() == []
    assert store.lift_tombstone(stone.id) is None
    assert store.apply(
        proposal(create("memory", "Tabs", "indent with tabs")), scope="local", trigger="model"
    ).applied


def test_review_apply_promotes_candidates_to_verified(store: HarnessStore) -> None:
    result = store.apply(
        proposal(create("memory", "A", "x"), create("memory", "B", "y")), scope="local", trigger="auto"
    )
    review = store.record_review(result.id, "apply")
    assert review.review_of == result.id and review.trigger == "user"
    assert {store.state.get("memory", k).trust for k in ("a", "b")} == {"verified"}  # type: ignore[union-attr]


def test_review_reject_hides_entries_from_the_prompt_and_tombstones_their_content(
    store: HarnessStore,
) -> None:
    result = store.apply(
        proposal(create("memory", "Guess", "the user likes java")), scope="local", trigger="auto"
    )
    store.record_review(result.id, "reject")
    entry = store.state.get("memory", "guess")
    assert entry is not None and entry.trust == "rejected"
    assert "java" not in render_overview(store.state)
    again = store.apply(
        proposal(create("memory", "Guess 2", "The user likes Java")), scope="local", trigger="model"
    )
    assert again.applied_edits[0].error is not None and "tombstone" in again.applied_edits[0].error


def test_review_reject_forever_also_blocks_the_entry_id(store: HarnessStore) -> None:
    result = store.apply(proposal(create("memory", "Guess", "likes java")), scope="local", trigger="auto")
    store.record_review(result.id, "reject_forever")
    rewrite = store.apply(
        proposal(update("memory", "guess", "Guess", "something else entirely")),
        scope="local",
        trigger="model",
    )
    assert rewrite.applied_edits[0].error is not None and "tombstone" in rewrite.applied_edits[0].error


def test_review_can_be_limited_to_some_entries(store: HarnessStore) -> None:
    result = store.apply(
        proposal(create("memory", "A", "x"), create("memory", "B", "y")), scope="local", trigger="auto"
    )
    store.record_review(result.id, "apply", edit_ids=["b"])
    state = store.state
    assert (state.get("memory", "a").trust, state.get("memory", "b").trust) == ("candidate", "verified")  # type: ignore[union-attr]


def test_review_decision_can_be_rolled_back(store: HarnessStore) -> None:
    result = store.apply(proposal(create("memory", "A", "x")), scope="local", trigger="auto")
    review = store.record_review(result.id, "reject")
    store.rollback(review.id)
    entry = store.state.get("memory", "a")
    assert entry is not None and entry.trust == "candidate"


def test_rejecting_a_pending_proposal_tombstones_it_without_applying(store: HarnessStore) -> None:
    pending = proposal(create("memory", "Guess", "uses emacs"))
    added = store.reject_proposal(pending, forever=True)
    assert len(added) == 1 and added[0].forever
    # The rejection is a history record of its own that changed no entry.
    [record] = store.history()
    assert (record.tombstoned, record.applied_edits, store.state.count()) == (added, [], 0)
    assert store.apply(pending, scope="local", trigger="model").applied_edits[0].error is not None
    # "Forever" also blocks the (derived) entry id, whatever the new content says.
    other = store.apply(
        proposal(create("memory", "Guess", "something unrelated")), scope="local", trigger="model"
    )
    assert other.applied_edits[0].error == f"content was rejected before (tombstone {added[0].id})"


def test_state_as_of_reconstructs_each_point_in_history(store: HarnessStore) -> None:
    first = store.apply(proposal(create("memory", "A", "v1")), scope="local", trigger="model")
    second = store.apply(
        proposal(update("memory", "a", "A", "v2"), create("prompt", "P", "pea")),
        scope="local",
        trigger="model",
    )
    third = store.apply(proposal(delete("memory", "a")), scope="local", trigger="model")
    assert store.state_as_of(first.id).get("memory", "a").content == "v1"  # type: ignore[union-attr]
    as_of_second = store.state_as_of(second.id)
    assert as_of_second.get("memory", "a").content == "v2" and as_of_second.get("prompt", "p") is not None  # type: ignore[union-attr]
    assert store.state_as_of(third.id).entries == store.state.entries
    with pytest.raises(RefinementNotFound):
        store.state_as_of("r-nope")
