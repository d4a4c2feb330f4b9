"""A session's project store is the one of the repository enclosing its cwd."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agent_core.trust.project_scope import find_repo, project_store


def test_the_project_store_is_found_from_a_subdirectory_of_a_git_repo(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    store = project_store(repo / "src" / "pkg")
    assert store is not None and store.root == repo.resolve() / ".continual-acp" / "harness"


def test_outside_a_repository_there_is_no_project_scope(tmp_path: Path) -> None:
    lonely = tmp_path / "nowhere"
    lonely.mkdir()
    assert find_repo(lonely) is None
