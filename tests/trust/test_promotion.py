"""Promotion of local entries to the project and global scopes, its undo, and deleted sessions."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from agent_core.refinement import RollbackOutcome
from agent_core.trust.promotion import PromotionError, deletion_notice, promote
from harness_store import HarnessStore
from harness_store.cli import main as harness_cli
from harness_store.project import ProjectStore


@pytest.fixture
def local(tmp_path: Path) -> HarnessStore:
    store = HarnessStore(tmp_path / "home" / "sessions" / "s1" / "harness")
    store.apply(
        {"edits": [{"action": "create", "kind": "memory", "title": "Build", "content": "make all"}]},
        scope="local",
        trigger="model",
        session_id="s1",
    )
    return store


def test_promote_to_project_moves_the_entry_as_two_refinements(local: HarnessStore, tmp_path: Path) -> None:
    project = ProjectStore(tmp_path / "repo")
    done = promote("build", "project", local_store=local, target_store=project, session_id="s1")
    assert done.applied
    moved = project.load().get("memory", "build")
    assert moved is not None and (moved.scope, moved.content, moved.trust) == (
        "project",
        "make all",
        "verified",
    )
    assert local.load().get("memory", "build") is None
    assert local.history()[-1].applied_edits[0].reason == f"promoted to project as {done.created.id}"


def test_rolling_back_a_promotion_brings_the_entry_back_to_local_only(
    local: HarnessStore, tmp_path: Path
) -> None:
    from agent_core.refinement import HarnessSurface

    glob = HarnessStore(tmp_path / "home" / "harness")
    done = promote("build", "global", local_store=local, target_store=glob, session_id="s1")
    assert done.created is not None

    async def undo() -> RollbackOutcome:
        surface = HarnessSurface.for_stores(local, glob, session_id="s1")
        return await surface.rollback(done.created.id)

    outcome = anyio.run(undo)
    assert outcome.result is not None and outcome.result.applied and outcome.partner_id is not None
    assert glob.load().get("memory", "build") is None
    back = local.load().get("memory", "build")
    assert back is not None and (back.content, back.trust) == ("make all", "candidate")


def test_a_refused_promotion_leaves_the_local_entry(local: HarnessStore, tmp_path: Path) -> None:
    glob = HarnessStore(tmp_path / "home" / "harness")
    glob.apply(
        {"edits": [{"action": "create", "kind": "memory", "id": "build", "title": "B", "content": "other"}]},
        scope="global",
        trigger="user",
    )
    done = promote("build", "global", local_store=local, target_store=glob, session_id="s1")
    assert done.created is not None and done.created.errors == ["create memory build: entry already exists"]
    assert done.removed is None and local.load().get("memory", "build") is not None


def test_promoting_an_unknown_entry_says_how_to_find_one(local: HarnessStore) -> None:
    with pytest.raises(PromotionError, match=r"no local entry 'nope' in this session; /harness lists them"):
        promote("nope", "global", local_store=local, target_store=local, session_id="s1")


def test_deleting_a_session_lists_and_saves_its_local_entries_for_import(
    local: HarnessStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notice = deletion_notice(local, "s1", tmp_path / "home" / "harness" / "deleted-sessions")
    assert notice is not None and notice.saved_to is not None
    assert "- memory `build`: Build" in notice.text
    assert json.loads(notice.saved_to.read_text())["edits"][0]["id"] == "build"
    monkeypatch.setenv("CONTINUAL_ACP_HOME", str(tmp_path / "home"))
    assert harness_cli(["import", str(notice.saved_to), "--scope", "global"]) == 0
    assert HarnessStore(tmp_path / "home" / "harness").load().get("memory", "build") is not None


def test_a_session_without_local_entries_has_no_deletion_notice(tmp_path: Path) -> None:
    assert deletion_notice(HarnessStore(tmp_path / "empty"), "s2", tmp_path / "out") is None
