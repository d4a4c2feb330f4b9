"""The curator's opt-in idle run (agent_core/refinement/idle_curation.py) over a real coordinator
and real stores: it applies only where the review policy allows, keeps its dry-run report
otherwise, is covered by quiescence while it runs, and never runs during a turn."""

from __future__ import annotations

import pytest

from agent_core.refinement import QuiescenceChanged
from agent_core.refinement.idle_curation import IdleCuration, applies_without_review
from agent_core.refinement.surface import HarnessSurface
from harness_store import HarnessStore

from .conftest import Recorder, Rig, serving

pytestmark = pytest.mark.anyio


def _duplicates(store: HarnessStore) -> None:
    first = store.apply(
        {"edits": [{"action": "create", "kind": "memory", "title": "Tests", "content": "Run make check."}]},
        scope="global",
        trigger="model",
    )
    store.record_review(first.id, "apply")
    store.apply(
        {"edits": [{"action": "create", "kind": "memory", "title": "Again", "content": "run `make check`"}]},
        scope="global",
        trigger="model",
    )


def _idle(rig: Rig, surface: HarnessSurface, *, applies: bool, running: bool = False) -> IdleCuration:
    return IdleCuration(
        surface,
        home=rig.home,
        seconds=0,
        turn_running=lambda: running,
        applies=lambda scope: applies,
    )


async def test_an_idle_pass_applies_as_one_refinement_inside_a_quiescence_bracket(rig: Rig) -> None:
    _duplicates(rig.glob)
    records = len(rig.glob.history())
    coordinator = rig.coordinator()
    recorder = Recorder()
    surface = HarnessSurface.of(coordinator)
    surface.subscribe(recorder)
    async with serving(coordinator, rig):
        idle = _idle(rig, surface, applies=True)
        idle.arm()
        assert idle.task is not None
        await idle.task
        assert await surface.wait_quiescent(30)
    assert len(rig.glob.history()) == records + 1
    assert rig.glob.history()[-1].trigger == "auto"
    assert rig.glob.load().get("memory", "again").trust == "rejected"  # type: ignore[union-attr]
    assert recorder.transitions[:2] == [False, True]  # not settled while the pass ran
    assert recorder.of(QuiescenceChanged)


async def test_where_the_policy_asks_for_review_the_idle_pass_only_keeps_its_report(rig: Rig) -> None:
    _duplicates(rig.glob)
    records = len(rig.glob.history())
    coordinator = rig.coordinator()
    surface = HarnessSurface.of(coordinator)
    async with serving(coordinator, rig):
        idle = _idle(rig, surface, applies=False)
        idle.arm()
        assert idle.task is not None
        await idle.task
    assert len(rig.glob.history()) == records
    assert "merge `memory/again` into `memory/tests`" in idle.reports["global"]


async def test_no_idle_pass_while_a_turn_runs(rig: Rig) -> None:
    _duplicates(rig.glob)
    coordinator = rig.coordinator()
    surface = HarnessSurface.of(coordinator)
    async with serving(coordinator, rig):
        idle = _idle(rig, surface, applies=True, running=True)
        idle.arm()
        assert idle.task is not None
        await idle.task
    assert idle.runs == 0 and idle.reports == {}


def test_the_review_policy_decides_where_an_idle_pass_may_apply() -> None:
    never = applies_without_review("ask", "never", set())
    assert never("local") and never("global") and never("project")
    default = applies_without_review("auto", "global_only", set())
    assert default("local") and not default("global") and not default("project")
