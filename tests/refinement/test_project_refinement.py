"""The project scope in refinement: what the planner is told, the rule its project edits
must keep, `/promote` to project through review, and where pending project reviews wait.

Real stores on disk (a real `ProjectStore` in a repository directory), the scripted model over HTTP.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from agent_core.events import RefinementReported
from agent_core.refinement import HarnessSurface, Policy, ReviewRequested
from agent_core.refinement.pending_files import PendingFiles, project_key
from agent_core.refinement.prompts import PROJECT_RULE
from agent_core.refinement.records import PendingReview
from harness_store import HarnessState, Proposal
from harness_store.project import ProjectStore, project_root
from harness_store.project_rules import RULE

from .conftest import Recorder, Rig, gate_reply, memory_edit, plan_reply, serving

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository working tree with a Makefile (what a project fact can be about)."""
    path = tmp_path / "repo"
    path.mkdir()
    (path / ".git").mkdir()
    (path / "Makefile").write_text("check:\n\tpytest -q\n", encoding="utf-8")
    return path


def _project_edit(**extra: Any) -> dict[str, Any]:
    edit = {**memory_edit("This repository's checks run with `make check`."), "scope": "project"}
    edit.update(id="repo_checks", title="Repo checks")
    edit.update(extra)
    return edit


def _per_user_pending(rig: Rig, repo: Path) -> Path:
    return rig.home / "harness" / "projects" / project_key(repo) / "pending"


def _local_memory(rig: Rig) -> None:
    rig.local.apply(
        {"edits": [{"action": "create", "kind": "memory", "title": "Build", "content": "make all"}]},
        scope="local",
        trigger="model",
        session_id="sess-1",
    )


# ---------------------------------------------------------------- item 1: the planner and the rule


async def test_the_planner_is_told_the_project_rule_when_the_session_is_in_a_repository(
    rig: Rig, repo: Path
) -> None:
    rig.server.push(plan_reply())
    coordinator, harness = rig.harness(project_store=ProjectStore(repo))
    async with serving(coordinator, rig):
        await harness.refine_now()
    assert PROJECT_RULE in rig.server.requests[0]["messages"][1]["content"]


async def test_a_planner_project_edit_about_a_repository_path_waits_for_review_beside_the_local_edit(
    rig: Rig, repo: Path
) -> None:
    rig.server.push(plan_reply(memory_edit(), _project_edit(about=["Makefile"])))
    project = ProjectStore(repo)
    coordinator, harness = rig.harness(project_store=project)
    recorder = Recorder()
    harness.subscribe(recorder)
    async with serving(coordinator, rig):
        outcome = await harness.refine_now()
        await harness.flushed()
    assert outcome.status == "applied" and rig.local.load().get("memory", "test_command") is not None
    [requested] = recorder.of(ReviewRequested)
    assert requested.pending.scope == "project"
    assert [(e.id, (e.metadata or {}).get("about")) for e in requested.pending.proposal.edits] == [
        ("repo_checks", ["Makefile"])
    ]
    assert project.load().count() == 0 and project.history() == []


async def test_a_planner_project_edit_naming_no_repository_path_is_refused_with_the_rule(
    rig: Rig, repo: Path
) -> None:
    rig.server.push(plan_reply(_project_edit()))
    project = ProjectStore(repo)
    coordinator, harness = rig.harness(project_store=project)
    recorder = Recorder()
    harness.subscribe(recorder)
    async with serving(coordinator, rig):
        outcome = await harness.refine_now()
        await harness.flushed()
    assert outcome.status == "refused" and harness.pending_reviews() == []
    [record] = project.history()
    assert [(e.applied, e.error) for e in record.applied_edits] == [
        (
            False,
            f'{RULE}: the edit names no repository path it is about (metadata.about: e.g. ["Makefile"])',
        )
    ]
    [card] = recorder.of(RefinementReported)
    assert card.applied is False and card.error is not None and RULE in card.error


async def test_the_review_gate_may_choose_the_project_scope_whose_edits_wait_for_review(
    rig: Rig, repo: Path
) -> None:
    edit = _project_edit(about="Makefile")
    del edit["scope"]  # a project refinement: every edit is a project edit
    rig.server.push(gate_reply(True, scope="project"), plan_reply(edit))
    coordinator, harness = rig.harness(project_store=ProjectStore(repo), auto_every=1, cooldown_seconds=0)
    async with serving(coordinator, rig):
        coordinator.jobs.turn_ended()
        assert await harness.wait_quiescent(30.0)
    assert harness.status().last is not None and harness.status().last.status == "pending_review"
    assert [p.scope for p in harness.pending_reviews()] == ["project"]
    assert 'answer scope "project"' in rig.server.requests[0]["messages"][1]["content"]


async def test_a_planner_project_edit_without_a_project_harness_fails_and_lands_nowhere(rig: Rig) -> None:
    rig.server.push(plan_reply(_project_edit(about=["Makefile"])))
    coordinator, harness = rig.harness()
    async with serving(coordinator, rig):
        outcome = await harness.refine_now()
    assert outcome.status == "failed" and outcome.error is not None
    assert "this session has no project harness" in outcome.error
    assert rig.local.load().count() == 0 and harness.pending_reviews() == []


def test_the_project_store_refuses_a_refine_edit_about_a_path_outside_the_repository(repo: Path) -> None:
    (repo.parent / "elsewhere.txt").write_text("x", encoding="utf-8")
    edit = {**_project_edit(), "metadata": {"about": ["../elsewhere.txt"]}}
    result = ProjectStore(repo).apply({"edits": [edit]}, trigger="auto", source="refine")
    assert [e.error for e in result.applied_edits] == [
        f"{RULE}: '../elsewhere.txt' is outside this repository"
    ]


def test_the_project_store_refuses_a_refine_edit_that_cites_no_evidence(repo: Path) -> None:
    edit = {**_project_edit(), "metadata": {"about": ["Makefile"]}, "evidence": []}
    result = ProjectStore(repo).apply({"edits": [edit]}, trigger="auto", source="refine")
    assert [e.error for e in result.applied_edits] == [
        f"{RULE}: the edit cites no evidence from the conversation"
    ]


def test_the_project_store_applies_a_refine_edit_about_an_existing_repository_path(repo: Path) -> None:
    edit = {**_project_edit(), "metadata": {"about": ["Makefile"]}}
    result = ProjectStore(repo).apply({"edits": [edit]}, trigger="auto", source="refine")
    assert [(e.applied, e.error) for e in result.applied_edits] == [(True, None)]


# ---------------------------------------------------------------- item 2: /promote to project is reviewed


async def test_promote_to_project_waits_for_review_and_writes_nothing_until_approved(
    rig: Rig, repo: Path
) -> None:
    _local_memory(rig)
    project = ProjectStore(repo)
    coordinator, harness = rig.harness(project_store=project)
    async with serving(coordinator, rig):
        done = await HarnessSurface.of(coordinator).promote("build", "project")
    assert done.created is None and harness.pending_review(done.proposal_id) is not None
    assert project.load().get("memory", "build") is None and project.history() == []
    assert rig.local.load().get("memory", "build") is not None


async def test_approving_a_project_promotion_applies_both_halves_and_rollback_undoes_both(
    rig: Rig, repo: Path
) -> None:
    _local_memory(rig)
    project = ProjectStore(repo)
    coordinator, _harness = rig.harness(project_store=project)
    async with serving(coordinator, rig):
        surface = HarnessSurface.of(coordinator)
        done = await surface.promote("build", "project")
        assert done.proposal_id is not None
        decided = await surface.decide(done.proposal_id, "apply")
        assert decided.status == "applied" and decided.refinement_id is not None
        moved = project.load().get("memory", "build")
        assert moved is not None and (moved.scope, moved.trust) == ("project", "verified")
        assert rig.local.load().get("memory", "build") is None
        assert (
            rig.local.history()[-1].applied_edits[0].reason
            == f"promoted to project as {decided.refinement_id}"
        )
        undone = await surface.rollback(decided.refinement_id)
    assert undone.result is not None and undone.result.applied
    assert project.load().get("memory", "build") is None
    assert rig.local.load().get("memory", "build") is not None


async def test_rejecting_a_project_promotion_keeps_the_local_entry_and_writes_nothing_to_the_repository(
    rig: Rig, repo: Path
) -> None:
    _local_memory(rig)
    coordinator, _harness = rig.harness(project_store=ProjectStore(repo))
    async with serving(coordinator, rig):
        surface = HarnessSurface.of(coordinator)
        done = await surface.promote("build", "project")
        assert done.proposal_id is not None
        decided = await surface.decide(done.proposal_id, "reject")
    assert decided.status == "rejected" and rig.local.load().get("memory", "build") is not None
    assert sorted(p.name for p in project_root(repo).rglob("*")) == []


async def test_a_refine_review_of_never_promotes_to_project_at_once(rig: Rig, repo: Path) -> None:
    _local_memory(rig)
    rig.policy = Policy(mode="auto", refine_review="never")
    project = ProjectStore(repo)
    coordinator, _harness = rig.harness(project_store=project)
    async with serving(coordinator, rig):
        done = await HarnessSurface.of(coordinator).promote("build", "project")
    assert done.proposal_id is None and done.applied
    assert project.load().get("memory", "build") is not None


# ---------------------------------------------------------------- item 3: pending project reviews per user


async def test_a_pending_project_review_waits_in_per_user_storage_not_in_the_repository(
    rig: Rig, repo: Path
) -> None:
    _local_memory(rig)
    coordinator, _harness = rig.harness(project_store=ProjectStore(repo))
    async with serving(coordinator, rig):
        done = await HarnessSurface.of(coordinator).promote("build", "project")
    saved = _per_user_pending(rig, repo) / f"{done.proposal_id}.json"
    assert oct(saved.stat().st_mode & 0o777) == "0o600"
    assert oct(saved.parent.stat().st_mode & 0o777) == "0o700"
    assert json.loads(saved.read_text())["promotion_of"] == ["memory", "build"]
    assert not (project_root(repo) / "pending").exists()


async def test_a_pending_project_review_survives_a_restart_and_approving_it_still_promotes(
    rig: Rig, repo: Path
) -> None:
    _local_memory(rig)
    project = ProjectStore(repo)
    first = rig.coordinator(project_store=project)
    async with serving(first, rig):
        done = await HarnessSurface.of(first).promote("build", "project")
    second, harness = rig.harness(project_store=ProjectStore(repo))
    assert done.proposal_id is not None
    assert [p.proposal_id for p in harness.pending_reviews()] == [done.proposal_id]
    async with serving(second, rig):
        decided = await harness.decide(done.proposal_id, "apply")
    assert decided.status == "applied" and project.load().get("memory", "build") is not None
    assert rig.local.load().get("memory", "build") is None
    assert list(_per_user_pending(rig, repo).iterdir()) == []


async def test_an_old_in_repo_pending_review_moves_to_per_user_storage_with_a_log_line(
    rig: Rig, repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = project_root(repo) / "pending"
    waiting = PendingReview(
        proposal_id="p-old-1",
        proposal=Proposal.model_validate({"summary": "old", "edits": [_project_edit(about=["Makefile"])]}),
        scope="project",
        trigger="auto",
        baseline=HarnessState.build({}, []),
    )
    assert PendingFiles(old).save(waiting, "sess-0")
    with caplog.at_level(logging.WARNING, logger="agent_core.refinement.pending_files"):
        _coordinator, harness = rig.harness(project_store=ProjectStore(repo))
    assert [p.proposal_id for p in harness.pending_reviews()] == ["p-old-1"]
    assert not old.exists() and (_per_user_pending(rig, repo) / "p-old-1.json").is_file()
    assert [r.getMessage() for r in caplog.records] == [
        f"moved 1 pending project review(s) out of the repository ({old}) to per-user storage "
        f"({_per_user_pending(rig, repo)})"
    ]
    await rig.aclose()
