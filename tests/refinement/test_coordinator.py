"""The refinement coordinator with real stores and the scripted model over HTTP."""

from __future__ import annotations

import json

import anyio
import pytest

from agent_core.events import RefinementReported
from agent_core.refinement import TRUNCATED_MESSAGE, Policy, QuiescenceChanged, ReviewRequested
from agent_core.refinement.prompts import PLANNER_SYSTEM_PROMPT, REVIEW_SYSTEM_PROMPT
from agent_core.testing.scripted_model import length_cut, text
from harness_store import RefinementNotFound
from harness_store.errors import ReviewNotFound

from .conftest import Recorder, Rig, gate_reply, memory_edit, plan_reply, serving, system_prompts

pytestmark = pytest.mark.anyio

WAIT = 30.0


async def test_truncated_planner_reply_fails_with_the_truncation_message_and_applies_nothing(
    rig: Rig,
) -> None:
    rig.server.push(
        length_cut('{"summary": "Remember", "edits": [{"action": "create", "kind": "memory", "ti')
    )
    coordinator, harness = rig.harness()
    recorder = Recorder()
    harness.subscribe(recorder)
    async with serving(coordinator, rig):
        outcome = await harness.refine_now()
        assert await harness.wait_quiescent(WAIT)
    assert outcome.status == "failed"
    assert outcome.error is not None and TRUNCATED_MESSAGE in outcome.error
    [report] = recorder.of(RefinementReported)
    assert report.applied is False and report.error is not None and TRUNCATED_MESSAGE in report.error
    assert rig.local.history() == [] and rig.local.load().count() == 0


async def test_invalid_json_and_missing_json_fail_with_different_messages(rig: Rig) -> None:
    rig.server.push(text("{'summary': 'python dict, not JSON'}"), text("Nothing to change, I think."))
    coordinator, harness = rig.harness()
    async with serving(coordinator, rig):
        invalid = await harness.refine_now()
        missing = await harness.refine_now()
    assert invalid.status == missing.status == "failed"
    assert invalid.error is not None and "not valid JSON" in invalid.error
    assert missing.error is not None and "no JSON object" in missing.error
    assert TRUNCATED_MESSAGE not in invalid.error + missing.error
    assert rig.local.history() == []


async def test_user_refine_applies_a_local_proposal_with_its_evidence(rig: Rig) -> None:
    rig.server.push(plan_reply(memory_edit()))
    coordinator, harness = rig.harness()
    recorder = Recorder()
    harness.subscribe(recorder)
    async with serving(coordinator, rig):
        outcome = await harness.refine_now(instructions="remember the test command")
        assert await harness.wait_quiescent(WAIT)
    assert outcome.status == "applied"
    entry = rig.local.load().get("memory", "test_command")
    assert entry is not None and entry.evidence == ["u-1"] and entry.trust == "verified"
    [report] = recorder.of(RefinementReported)
    assert report.refinement_id == outcome.refinement_id == harness.status().last_refinement_id
    assert "Run `make check`, not bare pytest." in report.edits[0]["after"]
    assert report.edits[0]["after_entry"]["content"] == "Run `make check`, not bare pytest."
    assert report.edits[0]["path"].endswith("view/local/memory/test_command.md")
    planner_request = rig.server.requests[0]
    assert planner_request["messages"][0]["content"] == PLANNER_SYSTEM_PROMPT
    user_text = planner_request["messages"][1]["content"]
    assert "[u-1] user:" in user_text and "remember the test command" in user_text
    assert "tools" not in planner_request


async def test_the_planners_schema_offers_updates_only_of_the_entries_the_store_has(rig: Rig) -> None:
    rig.server.push(plan_reply(memory_edit()), plan_reply())
    coordinator, harness = rig.harness()
    async with serving(coordinator, rig):
        assert (await harness.refine_now()).status == "applied"
        await harness.refine_now()
    first, second = (
        [
            shape["properties"]["action"]["const"]
            for shape in body["response_format"]["json_schema"]["schema"]["properties"]["edits"]["items"][
                "anyOf"
            ]
        ]
        for body in rig.server.requests[:2]
    )
    assert (first, second) == (["create"], ["create", "update", "delete"])
    update = rig.server.requests[1]["response_format"]["json_schema"]["schema"]["properties"]["edits"][
        "items"
    ]["anyOf"][1]
    assert update["properties"]["kind"] == {"type": "string", "const": "memory"}
    assert update["properties"]["id"]["enum"] == ["test_command"]


async def test_evidence_citing_a_message_not_in_the_transcript_is_refused(rig: Rig) -> None:
    rig.server.push(plan_reply(memory_edit(evidence=["m-invented"])))
    coordinator, harness = rig.harness()
    async with serving(coordinator, rig):
        outcome = await harness.refine_now()
    assert outcome.status == "refused"
    assert outcome.error is not None and "evidence cites unknown message m-invented" in outcome.error
    assert rig.local.load().get("memory", "test_command") is None


async def test_refine_model_is_used_for_planning_when_configured(rig: Rig) -> None:
    rig.config.refine_model = "cheap-model"
    rig.server.push(plan_reply(memory_edit()))
    coordinator, harness = rig.harness()
    async with serving(coordinator, rig):
        await harness.refine_now()
    assert rig.server.requests[0]["model"] == "cheap-model"
    assert rig.server.requests[0]["max_tokens"] <= rig.config.max_output_tokens


async def test_auto_review_every_k_turns_applies_local_edits_as_candidates(rig: Rig) -> None:
    rig.server.push(gate_reply(True), plan_reply(memory_edit()))
    coordinator, harness = rig.harness(auto_every=3, cooldown_seconds=0)
    async with serving(coordinator, rig):
        coordinator.jobs.turn_ended()
        coordinator.jobs.turn_ended()
        assert harness.status().pending == 0
        coordinator.jobs.turn_ended()
        # Queued synchronously: a status read right after the prompt response already sees it.
        assert harness.status().pending == 1 and harness.status().quiescent is False
        assert await harness.wait_quiescent(WAIT)
    assert system_prompts(rig.server) == [REVIEW_SYSTEM_PROMPT, PLANNER_SYSTEM_PROMPT]
    entry = rig.local.load().get("memory", "test_command")
    assert entry is not None and entry.trust == "candidate"
    assert harness.status().last is not None and harness.status().last.status == "applied"


async def test_review_gate_saying_no_plans_nothing(rig: Rig) -> None:
    rig.server.push(gate_reply(False))
    coordinator, harness = rig.harness(auto_every=1, cooldown_seconds=0)
    async with serving(coordinator, rig):
        coordinator.jobs.turn_ended()
        assert await harness.wait_quiescent(WAIT)
    assert len(rig.server.requests) == 1
    assert harness.status().last is not None and harness.status().last.status == "declined"
    assert rig.local.history() == []


async def test_a_failed_review_still_stamps_the_cooldown(rig: Rig) -> None:
    now = [1000.0]
    rig.server.push(text("not json at all"))
    coordinator, harness = rig.harness(auto_every=1, cooldown_seconds=60, clock=lambda: now[0])
    async with serving(coordinator, rig):
        coordinator.jobs.turn_ended()
        assert await harness.wait_quiescent(WAIT)
        assert harness.status().last is not None and harness.status().last.status == "failed"
        now[0] += 30
        coordinator.jobs.turn_ended()
        coordinator.compacted()
        assert harness.status().pending == 0, "inside the cooldown nothing is queued"
        now[0] += 31
        rig.server.push(gate_reply(False))
        coordinator.compacted()
        assert harness.status().pending == 1
        assert await harness.wait_quiescent(WAIT)
    assert len(rig.server.requests) == 2
    assert "compacted" in rig.server.requests[1]["messages"][1]["content"]


async def test_refinement_scheduled_from_a_cell_waits_for_the_end_of_the_turn(rig: Rig) -> None:
    rig.server.push(plan_reply(memory_edit()))
    coordinator, harness = rig.harness(auto_every=0)
    async with serving(coordinator, rig):
        answer = harness.schedule("remember the test command", "local")
        assert answer["scheduled"] is True
        assert harness.status().pending == 1 and not harness.status().quiescent
        assert rig.server.requests == [], "nothing runs while the turn is still going"
        coordinator.jobs.turn_ended()
        assert await harness.wait_quiescent(WAIT)
    assert rig.local.load().get("memory", "test_command") is not None
    assert harness.status().last is not None and harness.status().last.trigger == "model"


async def test_quiescence_is_announced_before_waiters_wake(rig: Rig) -> None:
    rig.server.push(plan_reply(memory_edit()))
    coordinator, harness = rig.harness(auto_every=0)
    order: list[str] = []

    async def listener(event: object) -> None:
        if isinstance(event, QuiescenceChanged):
            # A slow listener (a client write): waiters must still wake only after it returns.
            await anyio.sleep(0.05)
            order.append(f"notified quiescent={event.quiescent} last={event.last_refinement_id}")
        elif isinstance(event, RefinementReported):
            order.append("reported")

    harness.subscribe(listener)

    async def waiter() -> None:
        assert await harness.wait_quiescent(WAIT)
        order.append("waiter woke")

    async with serving(coordinator, rig):
        harness.schedule(None, "local")
        coordinator.jobs.turn_ended()
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
    rid = harness.status().last_refinement_id
    assert rid is not None
    assert order == [
        "notified quiescent=False last=None",
        "reported",
        f"notified quiescent=True last={rid}",
        "waiter woke",
    ]


async def test_wait_quiescent_times_out_while_work_is_pending(rig: Rig) -> None:
    _coordinator, harness = rig.harness(auto_every=0)
    harness.schedule(None, "local")  # held: the turn never ends in this test
    assert await harness.wait_quiescent(0.2) is False


async def test_global_proposal_waits_for_review_then_applies_as_verified(rig: Rig) -> None:
    rig.server.push(plan_reply(memory_edit()))
    coordinator, harness = rig.harness(auto_every=0)
    recorder = Recorder()
    harness.subscribe(recorder)
    async with serving(coordinator, rig):
        harness.schedule(None, "global")
        coordinator.jobs.turn_ended()
        assert await harness.wait_quiescent(WAIT)
        assert harness.status().last is not None and harness.status().last.status == "pending_review"
        [requested] = recorder.of(ReviewRequested)
        assert harness.pending_review(requested.pending.proposal_id) is not None
        assert rig.glob.history() == [], "nothing touches the store before the review"
        outcome = await harness.decide(requested.pending.proposal_id, "apply")
    assert outcome.status == "applied"
    entry = rig.glob.load().get("memory", "test_command")
    assert entry is not None and entry.scope == "global" and entry.trust == "verified"
    assert harness.pending_reviews() == []


async def test_apply_and_trust_skips_review_for_that_kind_for_the_rest_of_the_session(rig: Rig) -> None:
    rig.policy = Policy(mode="auto", refine_review="always")
    second = memory_edit("Prefer ruff over flake8.") | {"id": "linter", "title": "Linter"}
    rig.server.push(plan_reply(memory_edit()), plan_reply(second, summary="Remember the linter"))
    coordinator, harness = rig.harness(auto_every=0)
    async with serving(coordinator, rig):
        first = await harness.refine_now()
        assert first.status == "pending_review" and first.proposal_id is not None
        await harness.decide(first.proposal_id, "apply_always")
        later = await harness.refine_now()
    assert later.status == "applied"
    assert rig.local.load().get("memory", "linter") is not None


async def test_reject_forever_tombstones_and_the_same_proposal_is_refused_later(rig: Rig) -> None:
    rig.policy = Policy(mode="ask", refine_review="global_only")
    rig.server.push(plan_reply(memory_edit()), plan_reply(memory_edit()))
    coordinator, harness = rig.harness(auto_every=0)
    recorder = Recorder()
    harness.subscribe(recorder)
    async with serving(coordinator, rig):
        first = await harness.refine_now()
        assert first.proposal_id is not None
        rejected = await harness.decide(first.proposal_id, "reject_forever")
        assert rejected.status == "rejected"
        again = await harness.refine_now()
        assert again.proposal_id is not None
        refused = await harness.decide(again.proposal_id, "apply")
        assert await harness.wait_quiescent(WAIT)
    assert refused.status == "refused"
    assert refused.error is not None and "content was rejected before (tombstone t-" in refused.error
    assert rig.local.load().get("memory", "test_command") is None
    [stone] = rig.local.tombstones()
    assert stone.forever and stone.entry_id == "test_command"
    reports = recorder.of(RefinementReported)
    assert [r.applied for r in reports] == [False, False]
    assert reports[0].error is not None and "rejected in review forever" in reports[0].error


async def test_deciding_an_unknown_proposal_names_what_is_pending(rig: Rig) -> None:
    _coordinator, harness = rig.harness(auto_every=0)
    with pytest.raises(ReviewNotFound, match="no pending review or refinement 'p-nope'"):
        await harness.decide("p-nope", "apply")
    assert harness.status().quiescent


async def test_reviewing_applied_candidates_by_refinement_id_rejects_them_from_the_prompt(rig: Rig) -> None:
    rig.server.push(gate_reply(True), plan_reply(memory_edit()))
    coordinator, harness = rig.harness(auto_every=1, cooldown_seconds=0)
    async with serving(coordinator, rig):
        coordinator.jobs.turn_ended()
        assert await harness.wait_quiescent(WAIT)
        rid = harness.status().last_refinement_id
        assert rid is not None
        outcome = await harness.decide(rid, "reject")
    assert outcome.status in {"applied", "refused"}
    entry = rig.local.load().get("memory", "test_command")
    assert entry is not None and entry.trust == "rejected"
    from harness_store import render_overview

    assert "make check" not in render_overview(rig.local.load())
    from agent_core.refinement.host_ops import refine_status

    assert json.dumps(await refine_status(harness, {}))  # JSON-able for the status op


async def test_rollback_is_reported_and_restores_the_store(rig: Rig) -> None:
    rig.server.push(plan_reply(memory_edit()))
    coordinator, harness = rig.harness(auto_every=0)
    recorder = Recorder()
    harness.subscribe(recorder)
    async with serving(coordinator, rig):
        applied = await harness.refine_now()
        assert applied.refinement_id is not None
        undo = (await harness.rollback(applied.refinement_id)).result
        assert await harness.flushed()
        with pytest.raises(RefinementNotFound, match="no refinement 'r-missing'"):
            await harness.rollback("r-missing")
    assert undo is not None and undo.rollback_of == applied.refinement_id and undo.applied
    assert rig.local.load().get("memory", "test_command") is None
    reports = recorder.of(RefinementReported)
    assert [r.refinement_id for r in reports] == [applied.refinement_id, undo.id]
    assert harness.status().last_refinement_id == undo.id


async def test_flushed_returns_once_earlier_reports_reached_the_listeners(rig: Rig) -> None:
    rig.server.push(text("no json here"))
    coordinator, harness = rig.harness(auto_every=0)
    seen: list[str] = []

    async def slow(event: object) -> None:
        if isinstance(event, RefinementReported):
            await anyio.sleep(0.05)
            seen.append(event.summary)

    harness.subscribe(slow)
    async with serving(coordinator, rig):
        await harness.refine_now()
        assert await harness.flushed()
        assert seen == ["Refinement failed"]


async def test_pending_review_preview_diffs_against_the_current_entry(rig: Rig) -> None:
    from agent_core.refinement.reporting import preview_edits

    seed = {
        "action": "create",
        "kind": "memory",
        "id": "test_command",
        "title": "Test command",
        "content": "pytest",
    }
    rig.local.apply({"summary": "seed", "edits": [seed]}, scope="local", trigger="user")
    rig.policy = Policy(mode="auto", refine_review="always")
    rig.server.push(plan_reply(memory_edit() | {"action": "update"}))
    coordinator, harness = rig.harness(auto_every=0)
    async with serving(coordinator, rig):
        outcome = await harness.refine_now()
    assert outcome.proposal_id is not None
    pending = harness.pending_review(outcome.proposal_id)
    [edit] = preview_edits(pending, rig.local.load(), view_path=lambda s, k, i: f"/v/{s}/{k}/{i}.md")
    assert edit["path"] == "/v/local/memory/test_command.md"
    assert "pytest" in edit["before"] and "Run `make check`, not bare pytest." in edit["after"]
    assert "version: 2" in edit["after"]


async def test_a_failed_turn_still_releases_what_its_cells_scheduled(rig: Rig) -> None:
    rig.server.push(plan_reply(memory_edit()))
    coordinator, harness = rig.harness(auto_every=0)
    async with serving(coordinator, rig):
        harness.schedule(None, "local")
        coordinator.jobs.turn_failed()
        assert await harness.wait_quiescent(WAIT)
    assert harness.status().last is not None and harness.status().last.status == "applied"


async def test_a_local_review_decided_in_another_process_no_longer_waits(rig: Rig) -> None:
    from agent_core.refinement.pending_files import PendingFiles, pending_dir

    rig.policy = Policy(mode="auto", refine_review="always")
    rig.server.push(plan_reply(memory_edit()))
    coordinator, harness = rig.harness(auto_every=0)
    async with serving(coordinator, rig):
        outcome = await harness.refine_now()
        assert outcome.status == "pending_review" and harness.pending_review(outcome.proposal_id) is not None
        # A review panel's claim: it removes the file (and decides through the store itself).
        assert PendingFiles(pending_dir(rig.local)).remove(outcome.proposal_id)
        assert harness.pending_review(outcome.proposal_id) is None
