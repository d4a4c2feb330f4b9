"""System prompt building and prompt content conversion."""

from __future__ import annotations

import base64
from datetime import date
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_core.events import ImagePart, ResourceLinkPart, ResourcePart, TextPart
from agent_core.turn.content import plain_text, title_from, to_model_content
from agent_core.turn.system_prompt import BASE_PROMPT, PromptInputs, build_system_prompt


def test_prompt_sections_come_in_order_after_the_base(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Use tabs.")
    (tmp_path / "CLAUDE.md").write_text("Run make test.")
    prompt = build_system_prompt(
        PromptInputs(
            cwd=str(tmp_path),
            harness_overview="- memory: tests are slow",
            skill_index="- lint: run ruff",
            today=date(2026, 1, 2),
        )
    )
    assert prompt.startswith(BASE_PROMPT.rstrip())
    order = [
        prompt.index(s)
        for s in (
            "# Harness",
            "tests are slow",
            "# Skills",
            "# Project context",
            "Use tabs.",
            "Run make test.",
            str(tmp_path),
            "2026-01-02",
        )
    ]
    assert order == sorted(order)


def test_missing_optional_sections_are_left_out(tmp_path: Path) -> None:
    prompt = build_system_prompt(PromptInputs(cwd=str(tmp_path)))
    assert "# Harness" not in prompt and "# Skills" not in prompt and "# Project context" not in prompt


def test_base_prompt_states_the_rules_the_agent_depends_on() -> None:
    for rule in ("%%bash", "ipython", "project's own", "editor.write", "refine.run", "harness.search"):
        assert rule in BASE_PROMPT


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(overview=st.text(max_size=300), skills=st.text(max_size=100))
def test_base_prompt_is_a_fixed_prefix_whatever_the_harness_says(
    tmp_path: Path, overview: str, skills: str
) -> None:
    prompt = build_system_prompt(
        PromptInputs(cwd=str(tmp_path), harness_overview=overview, skill_index=skills)
    )
    assert prompt.startswith(BASE_PROMPT.rstrip())


def test_huge_agents_md_is_cut(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * 50_000)
    prompt = build_system_prompt(PromptInputs(cwd=str(tmp_path)))
    assert "AGENTS.md cut at" in prompt and prompt.count("x" * 1000) < 25


def test_text_only_prompt_is_a_plain_string() -> None:
    assert to_model_content([TextPart("a"), TextPart("b")]) == "a\n\nb"


def test_image_becomes_an_image_url_part_when_the_model_accepts_images() -> None:
    data = base64.b64encode(b"\x89PNG").decode()
    content = to_model_content([TextPart("look"), ImagePart(data, "image/png")])
    assert isinstance(content, list)
    assert content[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}


def test_image_is_described_when_the_model_cannot_see_images() -> None:
    content = to_model_content([ImagePart("aGk=", "image/jpeg")], images=False)
    assert isinstance(content, str) and "cannot see images" in content


def test_embedded_resource_is_inlined_with_its_uri() -> None:
    content = to_model_content([ResourcePart("file:///p/a.py", text="print(1)\n```\n")])
    assert isinstance(content, str)
    assert 'uri="file:///p/a.py"' in content and "print(1)" in content
    assert "````" in content  # the fence is longer than any fence inside the text


def test_file_link_is_read_from_disk(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("remember the milk")
    content = to_model_content([ResourceLinkPart(target.as_uri(), "notes.txt")])
    assert isinstance(content, str) and "remember the milk" in content


def test_other_schemes_and_missing_files_are_kept_as_references(tmp_path: Path) -> None:
    content = to_model_content(
        [
            ResourceLinkPart("zed://thread/42", "thread"),
            ResourceLinkPart((tmp_path / "gone.txt").as_uri(), "gone.txt"),
        ]
    )
    assert isinstance(content, str)
    assert 'uri="zed://thread/42"' in content and "could not be read" in content


def test_binary_resource_is_noted_not_inlined() -> None:
    content = to_model_content([ResourcePart("file:///x.bin", blob="AAAA", mime_type="application/zip")])
    assert isinstance(content, str) and "binary" in content and "AAAA" not in content


def test_title_is_the_first_line_bounded() -> None:
    assert title_from([TextPart("\n  Fix   the parser\nmore")]) == "Fix the parser"
    assert len(title_from([TextPart("y" * 200)])) == 60
    assert title_from([ImagePart("aGk=", "image/png")]) == "Untitled session"
    assert plain_text([TextPart("a"), ResourceLinkPart("file:///b.py", "b.py")]) == "a b.py"


def test_a_title_drops_control_and_bidirectional_override_characters() -> None:
    """An editor lists the title as one line of text: an escape sequence or a right-to-left override
    in it would disguise what it says."""
    assert title_from([TextPart("fix\x00 the\x1b[31m bug\u202egnp.exe\x7f\u2066x\u2069")]) == (
        "fix the[31m buggnp.exex"
    )
    assert title_from([TextPart("\x00\x1b\u202e")]) == "Untitled session"
