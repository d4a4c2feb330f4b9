"""RepoSnapshot: what runs after the task prompt is undone, content by content; hostile files are data."""

from __future__ import annotations

import os
from pathlib import Path

from continual_eval.repo_guard import RepoSnapshot


def test_restore_undoes_edits_additions_deletions_and_swapped_links_but_keeps_the_project_harness(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text("a = 1\n")
    (repo / "VERSION").write_text("1.0\n")
    (repo / "gone.txt").write_text("keep me\n")
    os.symlink("src/a.py", repo / "link")
    os.mkfifo(repo / "fifo")  # never opened: a snapshot of a FIFO would block forever
    snapshot = RepoSnapshot.take(repo)

    (repo / "src" / "a.py").write_text("a = 2\n")  # same size, other content
    (repo / "VERSION").write_text("2.0\n")
    (repo / "gone.txt").unlink()
    (repo / "dist").mkdir()
    (repo / "dist" / "app.txt").write_text("built\n")
    (repo / "link").unlink()
    os.symlink("/etc/passwd", repo / "link")
    (repo / ".continual-acp").mkdir()
    (repo / ".continual-acp" / "memory.md").write_text("a project note\n")

    changed = snapshot.restore()
    assert changed == ["VERSION", "dist", "dist/app.txt", "gone.txt", "link", "src/a.py"]
    assert (repo / "src" / "a.py").read_text() == "a = 1\n"
    assert (repo / "VERSION").read_text() == "1.0\n"
    assert (repo / "gone.txt").read_text() == "keep me\n"
    assert not (repo / "dist").exists()
    assert os.readlink(repo / "link") == "src/a.py"
    assert (repo / ".continual-acp" / "memory.md").read_text() == "a project note\n"
    assert not snapshot.copy.exists()


def test_restore_of_an_untouched_repository_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert RepoSnapshot.take(tmp_path).restore() == []
    assert (tmp_path / "f").read_text() == "x"
