"""The host's skill index is rebuilt only when the skill folders changed by content."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skills.index_cache import SkillIndexCache
from skills.user_skills import discover


def _write_skill(folder: Path, description: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    path.write_text(f"---\nname: {folder.name}\ndescription: {description}\n---\nBody.\n", encoding="utf-8")
    return path


def test_a_second_ask_with_an_unchanged_folder_does_not_rebuild_and_a_changed_skill_md_does(
    tmp_path: Path,
) -> None:
    cache = SkillIndexCache()
    skill_md = _write_skill(tmp_path / "deploy", "ship on fridays")
    first = cache.index([tmp_path])
    assert cache.index([tmp_path]) is first and cache.builds == 1
    # Same size, same timestamps: only the content says it changed.
    before = os.stat(skill_md)
    _write_skill(tmp_path / "deploy", "ship on mondays")
    os.utime(skill_md, ns=(before.st_atime_ns, before.st_mtime_ns))
    changed = cache.index([tmp_path])
    assert cache.builds == 2 and [s.description for s in changed.skills] == ["ship on mondays"]


def test_the_prompts_skill_section_is_built_once_for_an_unchanged_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_server.cli import _KernelSkills
    from skills.loader import SKILL_INDEXES

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    skill_md = _write_skill(tmp_path / "work" / ".continual-acp" / "skills" / "notes", "take notes")
    skills, cwd = _KernelSkills(), str(tmp_path / "work")
    built = SKILL_INDEXES.builds
    assert "- notes: take notes" in skills.index_text(cwd)
    assert "- notes: take notes" in skills.index_text(cwd)  # the next prompt
    assert [name for name, _ in skills.list_skills(cwd)] == ["notes"]
    assert SKILL_INDEXES.builds == built + 1
    skill_md.write_text("---\nname: notes\ndescription: keep a log\n---\n", encoding="utf-8")
    assert "- notes: keep a log" in skills.index_text(cwd)
    assert SKILL_INDEXES.builds == built + 2


def test_a_fifo_skill_md_is_a_problem_of_the_cached_index_not_a_hang(tmp_path: Path) -> None:
    (tmp_path / "trap").mkdir()
    os.mkfifo(tmp_path / "trap" / "SKILL.md")  # nobody ever writes it: an open for reading would block
    _write_skill(tmp_path / "fine", "works")
    cache = SkillIndexCache()
    index = cache.index([tmp_path])
    assert [s.name for s in index.skills] == ["fine"]
    assert any("trap" in p and "SKILL.md" in p for p in index.problems), index.problems
    assert cache.index([tmp_path]) is index and cache.builds == 1


def test_the_host_index_has_no_python_paths_and_the_kernels_does(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    _write_skill(folder, "helpers")
    (folder / "helper.py").write_text("X = 1\n", encoding="utf-8")
    assert [s.python_paths for s in SkillIndexCache().index([tmp_path]).skills] == [()]
    assert [s.python_paths for s in discover([tmp_path]).skills] == [(str(folder),)]
