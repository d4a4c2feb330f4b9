"""The project store: reviewable entry files in a repository, append-only history, scope rules,
and two people's refinements meeting in a real git merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness_store import HarnessState, HarnessStore
from harness_store.project import ProjectStore, project_root
from harness_store.project_files import parse_entry, render_entry
from harness_store.scopes import merge_scopes

from .conftest import git, memory


def test_an_entry_is_one_stable_text_file_under_the_repo(repo: Path) -> None:
    store = ProjectStore(repo)
    result = store.apply({"edits": [memory("Test command", "Run make check.")]}, trigger="user")
    path = project_root(repo) / "entries" / "memory" / "test_command.md"
    text = path.read_text()
    assert text.startswith('---\nid: "test_command"\nkind: "memory"\n')
    assert text.endswith("---\nRun make check.\n")
    entry = result.applied_edits[0].after
    assert entry is not None and render_entry(parse_entry(text)) == text == render_entry(entry)


def test_a_refinement_appends_one_sorted_history_line_naming_parents(repo: Path) -> None:
    store = ProjectStore(repo)
    first = store.apply({"edits": [memory("A", "one")]}, trigger="user")
    second = store.apply({"edits": [memory("A", "two", "update", "a")]}, trigger="user")
    lines = (project_root(repo) / "history.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [first.id, second.id]
    assert json.loads(lines[1])["parents"] == {"memory/a": first.id}
    assert lines[0] == json.dumps(json.loads(lines[0]), ensure_ascii=False, sort_keys=True)


def test_a_project_store_only_accepts_the_project_scope(repo: Path) -> None:
    with pytest.raises(ValueError, match="only accepts scope 'project'"):
        ProjectStore(repo).apply({"edits": [memory("A", "one")]}, scope="global", trigger="user")


def test_the_home_store_does_not_accept_the_project_scope(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="scope must be 'local' or 'global'"):
        HarnessStore(tmp_path / "h").apply({"edits": [memory("A", "one")]}, scope="project", trigger="user")


def test_rollback_restores_the_file_and_is_itself_recorded(repo: Path) -> None:
    store = ProjectStore(repo)
    store.apply({"edits": [memory("A", "one")]}, trigger="user")
    update = store.apply({"edits": [memory("A", "two", "update", "a")]}, trigger="user")
    back = store.rollback(update.id)
    assert back.applied and back.rollback_of == update.id
    assert store.load().get("memory", "a").content == "one"  # type: ignore[union-attr]
    assert [r.id for r in store.history()][-1] == back.id
    assert store.rolled_back_by(update.id) == back.id


def test_state_as_of_replays_the_history(repo: Path) -> None:
    store = ProjectStore(repo)
    first = store.apply({"edits": [memory("A", "one")]}, trigger="user")
    store.apply({"edits": [memory("A", "two", "update", "a")]}, trigger="user")
    assert store.state_as_of(first.id).get("memory", "a").content == "one"  # type: ignore[union-attr]


def test_merge_keeps_colliding_ids_of_three_scopes_visible(repo: Path, tmp_path: Path) -> None:
    glob = HarnessStore(tmp_path / "g")
    glob.apply({"edits": [memory("A", "global")]}, scope="global", trigger="user")
    local = HarnessStore(tmp_path / "sessions" / "s" / "harness")
    local.apply({"edits": [memory("A", "local")]}, scope="local", trigger="user")
    project = ProjectStore(repo)
    project.apply({"edits": [memory("A", "project")]}, trigger="user")
    merged = merge_scopes(glob.load(), local.load(), project.load())
    assert {k: e.content for k, e in merged.entries["memory"].items()} == {
        "a": "global",
        "project:a": "project",
        "local:a": "local",
    }


def test_merge_without_a_project_state_is_the_two_scope_merge() -> None:
    assert merge_scopes(HarnessState(), HarnessState()).count() == 0


def test_git_merge_of_two_refined_branches_surfaces_the_conflict(diverged: Path) -> None:
    merge = git(diverged, "merge", "bob", "-m", "merge bob", check=False)
    assert merge.returncode != 0  # the shared entry's file conflicts; the history merges by union
    git(diverged, "commit", "-qam", "merge bob (with markers)")
    store = ProjectStore(diverged)
    [conflict] = store.conflicts()
    assert (conflict.kind, conflict.entry_id) == ("memory", "shared")
    assert sorted(c.content for c in conflict.candidates if c is not None) == [
        "alice's version",
        "bob's version",
    ]
    state = store.load()
    assert state.get("memory", "shared") is None  # not picked: kept out of the prompt
    assert {"alice_note", "bob_note"} <= set(state.entries["memory"])


def test_the_merged_history_keeps_both_sides_records(diverged: Path) -> None:
    alice = [r.id for r in ProjectStore(diverged).history()]
    git(diverged, "merge", "bob", "-m", "merge bob", check=False)
    git(diverged, "commit", "-qam", "merge")
    merged = [r.id for r in ProjectStore(diverged).history()]
    assert merged[: len(alice)] == alice and len(merged) == len(alice) + 2
    assert "<<<<<<<" not in (project_root(diverged) / "history.jsonl").read_text()


def test_a_fork_whose_text_merged_cleanly_is_still_a_conflict(diverged: Path) -> None:
    git(diverged, "merge", "bob", "-m", "merge bob", check=False)
    # Someone resolves the text by hand (takes alice's file) without telling the store.
    git(diverged, "checkout", "--ours", "--", ".continual-acp/harness/entries/memory/shared.md")
    git(diverged, "commit", "-qam", "merge, took ours")
    [conflict] = ProjectStore(diverged).conflicts()
    assert conflict.reason.startswith("changed on both sides: ")
    assert len(conflict.refinements) == 2


def test_a_conflicted_entry_refuses_edits_until_resolved(diverged: Path) -> None:
    git(diverged, "merge", "bob", "-m", "merge bob", check=False)
    git(diverged, "commit", "-qam", "merge")
    store = ProjectStore(diverged)
    refused = store.apply({"edits": [memory("Shared", "mine", "update", "shared")]}, trigger="user")
    assert refused.applied_edits[0].error is not None
    assert refused.applied_edits[0].error.startswith("entry has an unresolved merge conflict")


def test_resolving_a_conflict_writes_the_chosen_side_and_appends_history(diverged: Path) -> None:
    git(diverged, "merge", "bob", "-m", "merge bob", check=False)
    git(diverged, "commit", "-qam", "merge")
    store = ProjectStore(diverged)
    [conflict] = store.conflicts()
    choice = next(
        i for i, c in enumerate(conflict.candidates) if c is not None and c.content == "bob's version"
    )
    before = len(store.history())
    result = store.resolve_conflict("memory", "shared", choice)
    assert result.applied
    assert store.conflicts() == []
    assert store.load().get("memory", "shared").content == "bob's version"  # type: ignore[union-attr]
    assert len(store.history()) == before + 1
    assert "<<<<<<<" not in store.view_path("memory", "shared").read_text()


def test_a_rebase_onto_the_other_branch_surfaces_the_conflict_too(diverged: Path) -> None:
    rebase = git(diverged, "rebase", "bob", check=False)
    assert rebase.returncode != 0
    git(diverged, "add", "-A")
    git(diverged, "-c", "core.editor=true", "rebase", "--continue", check=False)
    [conflict] = ProjectStore(diverged).conflicts()
    assert conflict.entry_id == "shared"


def test_a_local_refinement_cannot_edit_a_project_entry_by_name(repo: Path, tmp_path: Path) -> None:
    project = ProjectStore(repo)
    project.apply({"edits": [memory("A", "project")]}, trigger="user")
    local = HarnessStore(tmp_path / "sessions" / "s" / "harness")
    result = local.apply(
        {"edits": [memory("A", "mine", "update", "a")]},
        scope="local",
        trigger="model",
        global_state=merge_scopes(HarnessState(), HarnessState(), project.load()),
    )
    assert result.applied_edits[0].error == "project entry is read-only in a local refinement"


def test_a_project_refinement_cannot_edit_a_global_entry_by_name(repo: Path, tmp_path: Path) -> None:
    glob = HarnessStore(tmp_path / "g")
    glob.apply({"edits": [memory("G", "global")]}, scope="global", trigger="user")
    result = ProjectStore(repo).apply(
        {"edits": [memory("G", "mine", "delete", "g")]}, trigger="model", global_state=glob.load()
    )
    assert result.applied_edits[0].error == "global entry is read-only in a project refinement"


def test_a_record_whose_file_writes_were_cut_off_is_rolled_forward(repo: Path) -> None:
    store = ProjectStore(repo)
    store.apply({"edits": [memory("A", "one")]}, trigger="user")
    update = store.apply({"edits": [memory("A", "two", "update", "a")]}, trigger="user")
    # The crash state: the history has the update, the file still holds the version before it.
    before = update.applied_edits[0].before
    assert before is not None
    store.view_path("memory", "a").write_text(render_entry(before))
    fresh = ProjectStore(repo)
    assert fresh.load().get("memory", "a").content == "two"  # type: ignore[union-attr]
    fresh.apply({"edits": [memory("B", "other")]}, trigger="user")  # a locked write repairs the file
    assert parse_entry(store.view_path("memory", "a").read_text()).content == "two"


def test_a_hand_edited_file_is_not_overwritten_by_the_history(repo: Path) -> None:
    store = ProjectStore(repo)
    store.apply({"edits": [memory("A", "one")]}, trigger="user")
    path = store.view_path("memory", "a")
    path.write_text(path.read_text().replace("one", "edited by hand"))
    assert ProjectStore(repo).load().get("memory", "a").content == "edited by hand"  # type: ignore[union-attr]
