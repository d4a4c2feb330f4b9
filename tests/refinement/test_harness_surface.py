"""`HarnessSurface`: one answer per harness question over a session's two stores."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.events import RefinementReported
from agent_core.refinement import HarnessSurface, QuiescenceChanged, ReviewDecided, ReviewRequested
from agent_core.refinement.surface import RefinementNotFound, ReviewNotFound
from harness_store import HarnessStore

from .conftest import Rig, memory_edit, plan_reply, serving

pytestmark = pytest.mark.anyio


def note(entry_id: str, content: str, *, title: str | None = None) -> dict[str, Any]:
    return {
        "action": "create",
        "kind": "memory",
        "id": entry_id,
        "title": title or entry_id.replace("_", " ").title(),
        "content": content,
    }


def write(store: HarnessStore, scope: str, *edits: dict[str, Any]) -> str:
    result = store.apply({"summary": f"add {len(edits)}", "edits": list(edits)}, scope=scope, trigger="user")
    assert result.applied
    return result.id


async def test_find_names_the_store_whose_history_holds_the_id(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    local_id = write(rig.local, "local", note("tabs", "Indent with tabs."))
    global_id = write(rig.glob, "global", note("tests", "Run make check."))
    assert (await surface.find(local_id)).scope == "local"
    assert (await surface.find(global_id)).scope == "global"


async def test_find_of_an_unknown_id_raises_the_stores_not_found_error(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    with pytest.raises(RefinementNotFound, match="no refinement 'r-nope' in this session's or the global"):
        await surface.find("r-nope")


async def test_history_merges_both_stores_newest_first_and_pages_by_cursor(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    ids = [
        write(rig.local, "local", note("one", "1")),
        write(rig.glob, "global", note("two", "2")),
        write(rig.local, "local", note("three", "3")),
    ]
    first = await surface.history(2)
    assert [r.id for r in first.records] == ids[::-1][:2] and first.next_cursor == ids[1]
    rest = await surface.history(2, first.next_cursor)
    assert [r.id for r in rest.records] == [ids[0]] and rest.next_cursor is None


async def test_history_with_an_unknown_cursor_raises_not_found(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    with pytest.raises(RefinementNotFound):
        await surface.history(5, "r-unknown")


async def test_merged_state_keys_a_colliding_local_id_apart(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    write(rig.glob, "global", note("style", "Global style."))
    write(rig.local, "local", note("style", "Local style."))
    memories = (await surface.state("merged")).entries["memory"]
    assert memories["style"].content == "Global style." and memories["local:style"].content == "Local style."


async def test_state_as_of_a_refinement_shows_the_entries_right_after_it(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    first = write(rig.local, "local", note("one", "1"))
    write(rig.local, "local", note("two", "2"))
    assert set((await surface.state(as_of=first)).entries["memory"]) == {"one"}


async def test_search_ranks_by_shared_words_with_title_words_weighing_more(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    write(
        rig.local,
        "local",
        note("body_only", "The make target runs the checks."),
        note("in_title", "Run it before pushing.", title="Make check"),
        note("unrelated", "Answer in short sentences."),
    )
    hits = await surface.search("make check")
    assert [h.key for h in hits] == ["in_title", "body_only"]
    assert hits[0].score > hits[1].score


async def test_search_never_finds_a_rejected_entry(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    rid = write(rig.local, "local", note("secret", "zebra crossing"))
    rig.local.record_review(rid, "reject")
    assert await surface.search("zebra") == []


async def test_latest_undoable_skips_rollbacks_and_what_they_undid(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    older = write(rig.local, "local", note("one", "1"))
    newer = write(rig.glob, "global", note("two", "2"))
    rig.glob.rollback(newer)
    latest = await surface.latest_undoable()
    assert latest is not None and latest.id == older


async def test_latest_undoable_skips_a_newer_rejection_that_only_tombstoned(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    applied = write(rig.local, "local", note("one", "1"))
    rig.local.reject_proposal({"edits": [note("two", "never this")]})
    latest = await surface.latest_undoable()
    assert (latest.id if latest else None, len(rig.local.history())) == (applied, 2)


async def test_rollback_goes_through_the_service_and_reports_a_card(rig: Rig) -> None:
    coordinator = rig.coordinator(auto_every=0)
    surface = HarnessSurface.of(coordinator)
    seen: list[Any] = []

    async def collect(event: Any) -> None:
        seen.append(event)

    surface.subscribe(collect)
    rid = write(rig.local, "local", note("one", "1"))
    async with serving(coordinator, rig):
        outcome = await surface.rollback(rid)
    assert outcome.result is not None and outcome.result.rollback_of == rid and not outcome.refused
    [card] = [e for e in seen if isinstance(e, RefinementReported)]
    assert card.refinement_id == outcome.result.id
    assert [e.quiescent for e in seen if isinstance(e, QuiescenceChanged)] == [False, True]


async def test_rollback_of_an_already_rolled_back_refinement_names_the_rollback_and_writes_nothing(
    rig: Rig,
) -> None:
    coordinator = rig.coordinator(auto_every=0)
    surface = HarnessSurface.of(coordinator)
    rid = write(rig.local, "local", note("one", "1"))
    async with serving(coordinator, rig):
        first = await surface.rollback(rid)
        again = await surface.rollback(rid)
    assert first.result is not None
    assert again.rolled_back_by == first.result.id and again.result is None
    assert len(rig.local.history()) == 2


async def test_deciding_an_unknown_review_raises_review_not_found(rig: Rig) -> None:
    surface = HarnessSurface.of(rig.coordinator(auto_every=0))
    with pytest.raises(ReviewNotFound, match="no pending review or refinement 'p-nope'"):
        await surface.decide("p-nope", "apply")


async def test_a_decided_review_is_announced_after_its_card(rig: Rig) -> None:
    rig.policy = type(rig.policy)(mode="auto", refine_review="always")
    rig.server.push(plan_reply(memory_edit()))
    coordinator = rig.coordinator(auto_every=0)
    surface = HarnessSurface.of(coordinator)
    seen: list[Any] = []

    async def collect(event: Any) -> None:
        seen.append(event)

    surface.subscribe(collect)
    async with serving(coordinator, rig):
        waiting = await surface.refine_now()
        assert waiting.status == "pending_review" and waiting.proposal_id is not None
        assert [p.proposal_id for p in surface.pending_reviews()] == [waiting.proposal_id]
        decided = await surface.decide(waiting.proposal_id, "apply")
    assert decided.status == "applied" and surface.pending_reviews() == []
    kinds = [type(e) for e in seen if not isinstance(e, QuiescenceChanged)]
    assert kinds == [ReviewRequested, RefinementReported, ReviewDecided]


async def test_the_transcript_records_a_card_before_any_subscriber_sees_it(rig: Rig) -> None:
    coordinator = rig.coordinator(auto_every=0)
    order: list[str] = []
    surface = HarnessSurface.of(
        coordinator, record=lambda event: order.append(f"record {event.refinement_id}")
    )

    async def subscriber(event: Any) -> None:
        if isinstance(event, RefinementReported):
            order.append(f"card {event.refinement_id}")

    surface.subscribe(subscriber)
    rid = write(rig.local, "local", note("one", "1"))
    async with serving(coordinator, rig):
        outcome = await surface.rollback(rid)
    assert outcome.result is not None
    assert order == [f"record {outcome.result.id}", f"card {outcome.result.id}"]


async def test_an_unsubscribed_subscriber_hears_nothing_more(rig: Rig) -> None:
    coordinator = rig.coordinator(auto_every=0)
    surface = HarnessSurface.of(coordinator)
    seen: list[Any] = []

    async def collect(event: Any) -> None:
        seen.append(event)

    unsubscribe = surface.subscribe(collect)
    unsubscribe()
    rid = write(rig.local, "local", note("one", "1"))
    async with serving(coordinator, rig):
        await surface.rollback(rid)
    assert seen == []


async def test_without_a_model_refine_fails_naming_the_missing_setting_and_rollback_still_works(
    rig: Rig,
) -> None:
    from dataclasses import replace

    from agent_core.model import ModelClient
    from agent_core.refinement import (
        ModelClientCompletion,
        RefineBudgets,
        RefinementCoordinator,
        RefinementPlanner,
    )

    no_model = replace(rig.config, model=None)
    client = ModelClient(no_model)
    rig.clients.append(client)
    coordinator = RefinementCoordinator(
        session_id="sess-1",
        local_store=rig.local,
        global_store=rig.glob,
        planner=RefinementPlanner(ModelClientCompletion(client), RefineBudgets.from_model_limit(None)),
        trajectory=lambda: rig.trajectory,
        auto_every=0,
    )
    surface = HarnessSurface.of(coordinator)
    rid = write(rig.local, "local", note("one", "1"))
    async with serving(coordinator, rig):
        refused = await surface.refine_now()
        undone = await surface.rollback(rid)
    assert refused.status == "failed" and refused.error is not None
    assert "no model configured: set CONTINUAL_ACP_MODEL" in refused.error
    assert undone.result is not None and undone.result.applied
