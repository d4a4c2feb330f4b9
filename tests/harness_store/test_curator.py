"""The curator's deterministic pass (harness_store/curator.py) through the real store: what it
proposes, that it never deletes, never touches a person's or a pinned entry, refuses a merge into
a missing or unverified target, and that one rollback undoes a whole pass."""

from __future__ import annotations

import pytest
from harness_edits import create, proposal

from harness_store import HarnessStore, render_overview
from harness_store import core as store_core
from harness_store.curator import (
    ARCHIVED,
    CurationAction,
    CurationPlan,
    plan_curation,
    restore_plan,
)
from harness_store.models import HarnessEntry


def _model(store: HarnessStore, title: str, content: str, *, verified: bool = False, **extra: object) -> str:
    result = store.apply(proposal(create("memory", title, content, **extra)), scope="local", trigger="model")
    assert result.applied, result.errors
    if verified:
        store.record_review(result.id, "apply")
    return str(result.applied_edits[0].id)


def _old_empty(store: HarnessStore, monkeypatch: pytest.MonkeyPatch, title: str, content: str) -> str:
    """An entry stored before empty lessons were refused."""
    with monkeypatch.context() as patch:
        patch.setattr(store_core, "empty_lesson", lambda title, content: None)
        return _model(store, title, content)


def _ids(plan: CurationPlan, action: str) -> list[str]:
    return [a.id for a in plan.actions if a.action == action]


def test_the_pass_proposes_content_free_duplicates_harmful_and_unfollowed(
    store: HarnessStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    dots = _old_empty(store, monkeypatch, "Dots", "...")
    keep = _model(store, "Tests", "Run `make check` before committing.", verified=True)
    exact = _model(store, "Tests again", "run `make check` -- before committing!")
    near = _model(store, "Tests reordered", "Before committing, run make check")
    bad = _model(store, "Risky", "Use `rm -rf build` first.", verified=True)
    worse = _model(store, "Riskier", "Skip the tests.")
    idle = _model(store, "Idle", "Nobody reads this note.")
    standing = {bad: "harmful", worse: "harmful", idle: "unfollowed"}
    plan = plan_curation(store.state, standing=lambda e: standing.get(e.id, "neutral"))
    assert _ids(plan, "archive") == [dots, worse, idle]
    assert _ids(plan, "merge") == [exact, near]
    assert plan.rename_map == {f"memory/{exact}": f"memory/{keep}", f"memory/{near}": f"memory/{keep}"}
    assert _ids(plan, "demote") == [bad]
    assert plan.tokens_saved > 0
    report = plan.report()
    assert f"merge `memory/{exact}` into `memory/{keep}` (exact duplicate)" in report
    assert "Prompt tokens saved: ~" in report


def test_applying_a_pass_never_deletes_and_archived_entries_leave_the_prompt(
    store: HarnessStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    dots = _old_empty(store, monkeypatch, "Dots", "....")
    keep = _model(store, "Tests", "Run `make check` before committing.", verified=True)
    copy = _model(store, "Tests again", "Run make check before committing")
    before = store.state.count()
    result = store.curate(plan_curation(store.state))
    assert result.applied and not result.errors
    state = store.state
    assert state.count() == before  # archived, not deleted
    for entry_id in (dots, copy):
        archived = state.get("memory", entry_id)
        assert archived is not None and archived.trust == "rejected"
        assert archived.metadata[ARCHIVED]["by"] == result.id
    assert state.get("memory", copy).metadata[ARCHIVED]["merged_into"] == keep  # type: ignore[union-attr]
    overview = render_overview(state)
    assert "Tests again" not in overview and "Dots" not in overview and "Tests" in overview


def _person(store: HarnessStore, title: str, content: str, **extra: object) -> str:
    result = store.apply(proposal(create("memory", title, content, **extra)), scope="local", trigger="user")
    assert result.applied, result.errors
    return str(result.applied_edits[0].id)


def test_a_person_written_or_pinned_entry_is_never_touched(store: HarnessStore) -> None:
    keep = _model(store, "Tests", "Run `make check` before committing.", verified=True)
    mine = _person(store, "Mine", "Run make check before committing")
    pinned = _person(
        store, "Pinned", "before committing run make check", metadata={"pinned": True, "adopted": True}
    )
    adopted = _person(store, "Adopted", "Run make-check before committing", metadata={"adopted": True})
    everything_bad = plan_curation(store.state, standing=lambda e: "harmful")
    touched = {a.id for a in everything_bad.actions}
    assert mine not in touched and pinned not in touched
    assert adopted in touched  # adopted: a person handed it to the curator
    # A person's entry is the better merge target (verified by its writer, kept as it is).
    assert {a.target for a in everything_bad.actions if a.action == "merge"} == {mine}
    # A stale plan that names a person's entry is refused at apply time too.
    entry = store.state.get("memory", mine)
    assert entry is not None
    forged = CurationPlan((CurationAction("archive", "memory", entry.id, "forged", entry.version),))
    result = store.curate(forged)
    assert not result.applied
    assert result.applied_edits[0].error == "written or pinned by a person: the curator leaves it alone"
    assert store.state.get("memory", keep).trust == "verified"  # type: ignore[union-attr]


def test_marks_a_model_wrote_itself_shield_nothing(store: HarnessStore) -> None:
    pinned = _model(store, "Self pinned", "Nobody reads this note.", metadata={"pinned": True})
    fake = _model(store, "Self archived", "Nobody reads this one either.", metadata={ARCHIVED: {"by": "r-x"}})
    plan = plan_curation(store.state, standing=lambda e: "unfollowed")
    assert sorted(_ids(plan, "archive")) == sorted([fake, pinned])


def test_a_merge_into_a_missing_target_archives_nothing(store: HarnessStore) -> None:
    keep = _model(store, "Tests", "Run `make check` before committing.", verified=True)
    copy = _model(store, "Tests again", "Run make check before committing")
    plan = plan_curation(store.state)
    assert _ids(plan, "merge") == [copy]
    store.apply(proposal({"action": "delete", "kind": "memory", "id": keep}), scope="local", trigger="user")
    result = store.curate(plan)
    assert not result.applied
    assert result.applied_edits[0].error == f"merge target memory/{keep} does not exist; nothing archived"
    assert ARCHIVED not in store.state.get("memory", copy).metadata  # type: ignore[union-attr]


def test_duplicates_without_a_verified_member_are_held_not_merged(store: HarnessStore) -> None:
    _model(store, "Tests", "Run `make check` before committing.")
    _model(store, "Tests again", "Run make check before committing")
    plan = plan_curation(store.state)
    assert plan.actions == ()
    assert len(plan.held) == 1 and "no verified entry to merge into" in plan.held[0]


def test_one_rollback_undoes_a_whole_pass(store: HarnessStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _old_empty(store, monkeypatch, "Dots", "...")
    _model(store, "Tests", "Run `make check` before committing.", verified=True)
    _model(store, "Tests again", "Run make check before committing")
    bad = _model(store, "Risky", "Use `rm -rf build` first.", verified=True)
    before = {
        key: (*entry.content_key(), entry.trust) for key, entry in store.state.entries["memory"].items()
    }
    records = len(store.history())
    result = store.curate(
        plan_curation(store.state, standing=lambda e: "harmful" if e.id == bad else "neutral")
    )
    assert len(store.history()) == records + 1  # one record for the whole pass
    assert sum(e.applied for e in result.applied_edits) == 3
    assert store.state.get("memory", bad).trust == "candidate"  # type: ignore[union-attr]
    undone = store.rollback(result.id)
    assert undone.applied and not undone.errors
    after = {key: (*entry.content_key(), entry.trust) for key, entry in store.state.entries["memory"].items()}
    assert after == before


def test_a_stale_dry_run_is_refused_for_the_entries_that_changed(store: HarnessStore) -> None:
    _model(store, "Tests", "Run `make check` before committing.", verified=True)
    copy = _model(store, "Tests again", "Run make check before committing")
    plan = plan_curation(store.state)
    store.apply(
        proposal(
            {"action": "update", "kind": "memory", "id": copy, "title": "Tests again", "content": "Run tox."}
        ),
        scope="local",
        trigger="model",
    )
    result = store.curate(plan)
    assert result.applied_edits[0].error == "entry changed since the dry run; run the curator again"


def test_an_archived_entry_is_restored_with_its_trust(store: HarnessStore) -> None:
    idle = _model(store, "Idle", "Nobody reads this note.", verified=True)
    store.curate(plan_curation(store.state, standing=lambda e: "unfollowed"))
    assert store.state.get("memory", idle).trust == "rejected"  # type: ignore[union-attr]
    restored = store.curate(restore_plan(store.state, "memory", idle))
    assert restored.applied
    entry: HarnessEntry | None = store.state.get("memory", idle)
    assert entry is not None and entry.trust == "verified" and ARCHIVED not in entry.metadata


def test_merges_proposed_elsewhere_follow_the_passs_rules_and_never_chain(store: HarnessStore) -> None:
    from harness_store.curator import ProposedMerge, with_merges

    keep = _model(store, "Tests", "Run `make check` before committing.", verified=True)
    also = _model(store, "Lint", "Run `ruff check` before committing.", verified=True)
    loose = _model(store, "Style", "Keep lines short.")
    state = store.load()
    plan = with_merges(
        state,
        plan_curation(state),
        [
            ProposedMerge("memory", also, keep, "covered"),  # admitted
            ProposedMerge("memory", loose, also, "chain"),  # `also` is archived by this pass
            ProposedMerge("memory", keep, loose, "into a candidate"),
            ProposedMerge("memory", loose, loose, "itself"),
        ],
    )
    assert [(a.id, a.target, a.reason) for a in plan.actions] == [(also, keep, "model: covered")]
    assert [n.split(" refused: ")[1] for n in plan.notes] == [
        "the pass already changes the merge target",
        "the entry is a merge target of this pass",
        "an entry cannot be merged into itself",
    ]
    alone = with_merges(state, plan_curation(state), [ProposedMerge("memory", keep, loose, "")])
    assert alone.notes == (
        f"model merge `memory/{keep}` into `memory/{loose}` refused: "
        "the merge target is not verified; nothing archived",
    )
