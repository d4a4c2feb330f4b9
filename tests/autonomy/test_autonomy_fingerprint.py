"""The spin guard's workspace fingerprint: equal exactly when nothing the gates see has changed."""

from __future__ import annotations

import os
from pathlib import Path

from autonomy_helpers import git

from agent_core.autonomy import workspace_fingerprint


def test_git_fingerprint_is_stable_on_an_unchanged_repository(repo: Path) -> None:
    assert workspace_fingerprint(repo) == workspace_fingerprint(repo)
    assert workspace_fingerprint(repo).startswith("git:")


def test_git_fingerprint_changes_when_a_tracked_file_is_edited(repo: Path) -> None:
    before = workspace_fingerprint(repo)
    (repo / "app.py").write_text("VALUE = 2\n")
    assert workspace_fingerprint(repo) != before


def test_git_fingerprint_changes_when_an_already_modified_file_is_edited_again(repo: Path) -> None:
    (repo / "app.py").write_text("VALUE = 2\n")
    first = workspace_fingerprint(repo)
    (repo / "app.py").write_text("VALUE = 3\n")  # same `status` line (M app.py), different diff
    assert workspace_fingerprint(repo) != first


def test_git_fingerprint_changes_when_untracked_content_changes(repo: Path) -> None:
    (repo / "notes.txt").write_text("blocked on X\n")
    first = workspace_fingerprint(repo)
    (repo / "notes.txt").write_text("blocked on Y\n")  # same name, same status line
    assert workspace_fingerprint(repo) != first


def test_git_fingerprint_ignores_ignored_files_and_agent_bookkeeping(repo: Path) -> None:
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore build")
    before = workspace_fingerprint(repo)
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_bytes(b"\x00" * 10)
    (repo / ".continual-acp").mkdir()
    (repo / ".continual-acp" / "scratch.txt").write_text("x")
    assert workspace_fingerprint(repo) == before


def test_git_fingerprint_works_before_the_first_commit(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("1\n")
    git(tmp_path, "add", "a.py")
    first = workspace_fingerprint(tmp_path)
    assert first.startswith("git:")
    (tmp_path / "a.py").write_text("2\n")
    assert workspace_fingerprint(tmp_path) != first


def test_walk_fingerprint_outside_git_changes_on_size_or_mtime(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    target = tmp_path / "src" / "main.c"
    target.write_text("int main;\n")
    first = workspace_fingerprint(tmp_path)
    assert first.startswith("walk:")
    assert workspace_fingerprint(tmp_path) == first
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert workspace_fingerprint(tmp_path) != first


def test_walk_fingerprint_ignores_virtualenvs_node_modules_and_caches(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("x = 1\n")
    before = workspace_fingerprint(tmp_path)
    (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
    (tmp_path / "node_modules" / "pkg" / "index.js").write_text("1")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")  # a venv under any name
    (tmp_path / "env" / "lib.py").write_text("1")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "main.pyc").write_bytes(b"1")
    assert workspace_fingerprint(tmp_path) == before
