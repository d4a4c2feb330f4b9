"""Apply: create/update/delete of every kind, baseline, existence, trust, scope, evidence, one record."""

from __future__ import annotations

import pytest
from harness_edits import create, delete, proposal, update

from harness_store import KINDS, HarnessStore, merge


@pytest.mark.parametrize("kind", KINDS)
def test_create_update_delete_of_every_kind(store: HarnessStore, kind: str) -> None:
    created = store.apply(proposal(create(kind, "Alpha", "first")), scope="local", trigger="model")
    assert created.applied_edits[0].applied, created.errors
    entry = store.state.get(kind, "alpha")
    assert entry is not None and entry.version == 1 and entry.content == "first" and entry.path == "general"

    updated = store.apply(proposal(update(kind, "alpha", "Alpha", "second")), scope="local", trigger="model")
    edit = updated.applied_edits[0]
    assert edit.applied and edit.before is not None and edit.after is not None
    assert (edit.before.content, edit.after.content) == ("first", "second")
    assert edit.after.version == 2
    assert edit.after.created_at == edit.before.created_at

    deleted = store.apply(proposal(delete(kind, "alpha")), scope="local", trigger="model")
    assert deleted.applied_edits[0].applied and deleted.applied_edits[0].after is None
    assert store.state.get(kind, "alpha") is None


def test_create_of_an_existing_entry_is_refused(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "A", "x")), scope="local", trigger="model")
    result = store.apply(proposal(create("memory", "A", "y")), scope="local", trigger="model")
    assert result.applied_edits[0].error == "entry already exists"


@pytest.mark.parametrize("edit", [update("memory", "ghost", "t", "c"), delete("memory", "ghost")])
def test_update_or_delete_of_a_missing_entry_is_refused(store: HarnessStore, edit: dict[str, object]) -> None:
    result = store.apply(proposal(edit), scope="local", trigger="model")
    assert result.applied_edits[0].error == "entry not found"


def test_refused_and_applied_edits_share_one_result_and_one_history_record(store: HarnessStore) -> None:
    result = store.apply(
        proposal(create("memory", "A", "x"), delete("memory", "ghost"), create("prompt", "B", "y")),
        scope="local",
        trigger="model",
    )
    assert [e.applied for e in result.applied_edits] == [True, False, True]
    assert [r.id for r in store.history()] == [result.id]


def test_a_proposal_with_nothing_applied_still_writes_one_history_record(store: HarnessStore) -> None:
    result = store.apply(proposal(delete("memory", "ghost")), scope="local", trigger="model")
    assert not result.applied
    assert store.get_refinement(result.id) == result


def test_baseline_refuses_an_entry_changed_since_planning(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "A", "v1")), scope="local", trigger="model")
    baseline = store.state
    store.apply(
        proposal(update("memory", "a", "A", "v2 from another window")), scope="local", trigger="model"
    )
    result = store.apply(
        proposal(update("memory", "a", "A", "v3")), scope="local", trigger="model", baseline=baseline
    )
    assert result.applied_edits[0].error == "entry changed during refinement planning"
    entry = store.state.get("memory", "a")
    assert entry is not None and entry.content == "v2 from another window"


def test_baseline_refuses_a_create_when_the_entry_appeared_since_planning(store: HarnessStore) -> None:
    baseline = store.state
    store.apply(proposal(create("memory", "A", "someone else")), scope="local", trigger="model")
    result = store.apply(
        proposal(create("memory", "A", "mine")), scope="local", trigger="model", baseline=baseline
    )
    assert result.applied_edits[0].error == "entry changed during refinement planning"


def test_sequential_edits_to_one_entry_in_one_proposal_are_not_compared_with_the_stale_baseline(
    store: HarnessStore,
) -> None:
    baseline = store.state
    result = store.apply(
        proposal(
            create("memory", "A", "v1"), update("memory", "a", "A", "v2"), update("memory", "a", "A", "v3")
        ),
        scope="local",
        trigger="model",
        baseline=baseline,
    )
    assert all(e.applied for e in result.applied_edits), result.errors
    entry = store.state.get("memory", "a")
    assert entry is not None and entry.content == "v3" and entry.version == 3


def test_baseline_may_be_a_merged_view_with_local_colliding_keys(
    tmp_path: object, store: HarnessStore
) -> None:
    store.apply(proposal(create("memory", "A", "local v1")), scope="local", trigger="model")
    global_store = HarnessStore(store.root.parent / "global")
    global_store.apply(proposal(create("memory", "A", "global")), scope="global", trigger="user")
    baseline = merge(global_store.state, store.state)
    assert set(baseline.entries["memory"]) == {"a", "local:a"}
    result = store.apply(
        proposal(update("memory", "a", "A", "local v2")), scope="local", trigger="model", baseline=baseline
    )
    assert result.applied_edits[0].applied, result.errors


@pytest.mark.parametrize(
    ("trigger", "trust", "source"),
    [
        ("user", "verified", "user"),
        ("cli", "verified", "user"),
        ("model", "candidate", "agent"),
        ("auto", "candidate", "refine"),
    ],
)
def test_trust_and_source_follow_the_trigger(
    store: HarnessStore, trigger: str, trust: str, source: str
) -> None:
    store.apply(proposal(create("memory", "A", "x")), scope="local", trigger=trigger)
    entry = store.state.get("memory", "a")
    assert entry is not None and (entry.trust, entry.source) == (trust, source)


def test_a_model_update_of_a_verified_entry_makes_it_a_candidate_again(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "A", "x")), scope="local", trigger="user")
    store.apply(proposal(update("memory", "a", "A", "model rewrite")), scope="local", trigger="model")
    entry = store.state.get("memory", "a")
    assert entry is not None and entry.trust == "candidate"


def test_update_keeps_the_entry_scope_and_fields_it_does_not_name(store: HarnessStore) -> None:
    store.apply(
        proposal(create("memory", "A", "x", path="tools", metadata={"k": 1})), scope="global", trigger="user"
    )
    store.apply(proposal(update("memory", "a", "A", "y")), scope="global", trigger="user")
    entry = store.state.get("memory", "a")
    assert entry is not None and (entry.scope, entry.path, entry.metadata) == ("global", "tools", {"k": 1})


def test_local_refinement_cannot_update_or_delete_a_global_entry(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "Shared", "global fact")), scope="global", trigger="user")
    result = store.apply(
        proposal(update("memory", "shared", "Shared", "local rewrite"), delete("memory", "shared")),
        scope="local",
        trigger="model",
    )
    assert [e.error for e in result.applied_edits] == ["global entry is read-only in a local refinement"] * 2
    entry = store.state.get("memory", "shared")
    assert entry is not None and entry.content == "global fact"


def test_local_refinement_naming_an_id_of_the_global_store_is_refused_by_scope(
    tmp_path: object, store: HarnessStore
) -> None:
    global_store = HarnessStore(store.root.parent / "global")
    global_store.apply(proposal(create("memory", "Shared", "global fact")), scope="global", trigger="user")
    result = store.apply(
        proposal(update("memory", "shared", "Shared", "x")),
        scope="local",
        trigger="model",
        global_state=global_store.state,
    )
    assert result.applied_edits[0].error == "global entry is read-only in a local refinement"
    # A global refinement may change it.
    promoted = global_store.apply(
        proposal(update("memory", "shared", "Shared", "x")), scope="global", trigger="user"
    )
    assert promoted.applied_edits[0].applied


def test_evidence_citing_unknown_messages_is_refused_and_known_evidence_is_recorded(
    store: HarnessStore,
) -> None:
    known = {"m1", "m2"}
    result = store.apply(
        proposal(
            create("memory", "Good", "x", evidence=["m1", {"message_id": "m2"}]),
            create("memory", "Bad", "y", evidence="m9"),
        ),
        scope="local",
        trigger="model",
        evidence_checker=known,
    )
    good, bad = result.applied_edits
    assert good.applied and good.evidence == ["m1", "m2"]
    assert bad.error == "evidence cites unknown message m9"
    entry = store.state.get("memory", "good")
    assert entry is not None and entry.evidence == ["m1", "m2"]


def test_evidence_checker_may_be_a_callable(store: HarnessStore) -> None:
    result = store.apply(
        proposal(create("memory", "A", "x", evidence=["u-3"])),
        scope="local",
        trigger="model",
        evidence_checker=lambda message_id: message_id.startswith("u-"),
    )
    assert result.applied_edits[0].applied


def test_refinement_ids_made_in_the_same_millisecond_do_not_collide(store: HarnessStore) -> None:
    from harness_store.ids import new_refinement_id

    ids = [new_refinement_id() for _ in range(2000)]
    assert len(set(ids)) == 2000
    assert ids == sorted(ids, key=lambda i: i.rsplit("-", 1)[0])


def test_unknown_scope_or_trigger_is_a_programming_error(store: HarnessStore) -> None:
    with pytest.raises(ValueError, match="scope must be"):
        store.apply(proposal(), scope="team", trigger="user")
    with pytest.raises(ValueError, match="trigger must be"):
        store.apply(proposal(), scope="local", trigger="robot")
