"""Agent Skills discovery: roots in order, frontmatter, problems reported, index for the prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from skills.user_skills import discover, parse_frontmatter, read_skill_text, render_index, skill_roots


def _skill(root: Path, folder: str, header: str, body: str = "Body.") -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\n{header}\n---\n{body}\n", encoding="utf-8")
    return path


def test_roots_are_project_then_config_then_claude_then_codex(tmp_path: Path) -> None:
    roots = skill_roots(tmp_path / "proj", {"HOME": str(tmp_path / "h")})
    assert roots == [
        tmp_path / "proj" / ".continual-acp" / "skills",
        tmp_path / "h" / ".config" / "continual-acp" / "skills",
        tmp_path / "h" / ".claude" / "skills",
        tmp_path / "h" / ".codex" / "skills",
    ]


def test_xdg_config_home_moves_the_config_root(tmp_path: Path) -> None:
    roots = skill_roots(tmp_path, {"HOME": str(tmp_path / "h"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert roots[1] == tmp_path / "cfg" / "continual-acp" / "skills"


def test_frontmatter_reads_quoted_and_folded_values() -> None:
    meta = parse_frontmatter(
        "---\nname: 'pdf-forms'\ndescription: >\n  Fill PDF forms\n  and read them.\nlicense: MIT\n---\nbody"
    )
    assert meta == {"name": "pdf-forms", "description": "Fill PDF forms and read them.", "license": "MIT"}


def test_text_without_a_header_has_no_frontmatter() -> None:
    assert parse_frontmatter("# Just markdown\n") is None
    assert parse_frontmatter("---\nname: x\n(no closing fence)") is None


def test_first_root_wins_and_bad_folders_are_reported_not_fatal(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    _skill(first, "deploy", "name: deploy\ndescription: project deploy steps")
    _skill(second, "deploy", "name: deploy\ndescription: user-wide deploy steps")
    _skill(second, "broken", "description: no name here")
    _skill(second, "Bad_Name", "name: Bad_Name\ndescription: capitals")
    (second / "not-a-skill").mkdir()
    index = discover([first, second, tmp_path / "missing"])
    assert [(s.name, s.description) for s in index.skills] == [("deploy", "project deploy steps")]
    problems = "\n".join(index.problems)
    assert "shadowed" in problems and "has no name" in problems and "lowercase" in problems


def test_full_text_is_read_on_demand_and_unknown_names_say_what_exists(tmp_path: Path) -> None:
    _skill(tmp_path, "notes", "name: notes\ndescription: take notes", body="Step 1. Write it down.")
    index = discover([tmp_path])
    assert "Step 1. Write it down." in read_skill_text(index, "notes")
    with pytest.raises(KeyError, match="known: notes"):
        read_skill_text(index, "nope")


def test_python_in_a_skill_folder_is_put_on_the_path(tmp_path: Path) -> None:
    folder = _skill(tmp_path, "tools", "name: tools\ndescription: helpers")
    (folder / "helpers.py").write_text("X = 1\n")
    package = _skill(tmp_path, "pkgskill", "name: pkgskill\ndescription: a package")
    (package / "__init__.py").write_text("")
    index = discover([tmp_path])
    paths = {s.name: s.python_paths for s in index.skills}
    assert paths["tools"] == (str(folder),)
    assert paths["pkgskill"] == (str(tmp_path),)


def test_index_for_the_prompt_is_one_line_per_skill_and_bounded(tmp_path: Path) -> None:
    for i in range(50):
        _skill(tmp_path, f"s{i:02d}", f"name: s{i:02d}\ndescription: {'does things ' * 10}")
    index = discover([tmp_path])
    text = render_index(index.skills, max_chars=1_500)
    assert len(text) <= 1_600
    assert text.startswith("# Skills")
    assert "- s00: does things" in text
    assert "more skills" in text
    assert render_index(()) == ""
