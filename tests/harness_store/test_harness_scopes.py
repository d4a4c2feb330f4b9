"""`Scopes`: a session's three stores as one value (which holds an id, in which order, merged)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness_store import HarnessStore, HarnessStoreError, ProjectStore, Scopes


def _note(entry_id: str, content: str) -> dict[str, object]:
    return {
        "summary": f"add {entry_id}",
        "edits": [
            {"action": "create", "kind": "memory", "id": entry_id, "title": entry_id, "content": content}
        ],
    }


def _scopes(tmp_path: Path, *, project: bool) -> Scopes:
    local = HarnessStore(tmp_path / "home" / "sessions" / "s1" / "harness")
    glob = HarnessStore(tmp_path / "home" / "harness")
    repo = tmp_path / "repo"
    if project:
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return Scopes(local, glob, ProjectStore(repo) if project else None)


def test_each_asks_the_sessions_own_store_first_then_the_project_then_global(tmp_path: Path) -> None:
    scopes = _scopes(tmp_path, project=True)
    assert [scope for scope, _ in scopes.each()] == ["local", "project", "global"]
    assert [scope for scope, _ in _scopes(tmp_path / "other", project=False).each()] == ["local", "global"]


def test_locate_names_the_scope_whose_history_holds_the_id(tmp_path: Path) -> None:
    scopes = _scopes(tmp_path, project=True)
    made = {
        "local": scopes.local.apply(_note("a", "local fact"), scope="local", trigger="user"),
        "project": scopes.store("project").apply(_note("b", "repo fact"), scope="project", trigger="user"),
        "global": scopes.global_.apply(_note("c", "shared fact"), scope="global", trigger="user"),
    }
    for scope, result in made.items():
        found = scopes.locate(result.id)
        assert found is not None and found[0] == scope and found[1].id == result.id
    assert scopes.locate("r-19700101-000000000-00000000") is None


def test_the_project_store_of_a_session_outside_a_repository_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(HarnessStoreError, match="no project harness"):
        _scopes(tmp_path, project=False).store("project")


def test_merged_keys_a_colliding_local_id_apart_and_lists_the_sessions_tombstones_first(
    tmp_path: Path,
) -> None:
    scopes = _scopes(tmp_path, project=False)
    scopes.global_.apply(_note("same", "global text"), scope="global", trigger="user")
    scopes.local.apply(_note("same", "local text"), scope="local", trigger="user")
    scopes.local.reject_proposal(_note("gone", "rejected local text"))
    scopes.global_.reject_proposal(_note("gone2", "rejected global text"))
    merged = scopes.merged()
    assert {key: e.content for key, e in merged.entries["memory"].items()} == {
        "same": "global text",
        "local:same": "local text",
    }
    assert [t.content for t in merged.tombstones] == ["rejected local text", "rejected global text"]
