"""Every shipped editor config names the client versions it was tried with; CodeCompanion shows the work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from acp_server.console.editor_launch import EDITORS

CONFIGS = Path(__file__).resolve().parents[2] / "editor-configs"
COMMENTED = ("neovim/codecompanion.lua", "neovim/avante.lua", "emacs/continual-acp-agent-shell.el")


@pytest.mark.parametrize("name", COMMENTED)
def test_a_config_that_can_hold_comments_says_what_it_was_tested_with(name: str) -> None:
    assert re.search(r"^(--|;;) Tested with: \S", (CONFIGS / name).read_text(encoding="utf-8"), re.M)


def test_the_readme_table_names_a_tested_version_for_every_config_file() -> None:
    readme = (CONFIGS / "README.md").read_text(encoding="utf-8")
    files = sorted(
        str(p.relative_to(CONFIGS)) for p in CONFIGS.rglob("*") if p.is_file() and p.name != "README.md"
    )
    for name in files:
        [row] = [line for line in readme.splitlines() if line.startswith("|") and f"`{name}`" in line]
        assert row.rstrip(" |").rsplit("|", 1)[-1].strip(), row


def test_the_codecompanion_config_turns_on_verbose_output() -> None:
    text = (CONFIGS / "neovim/codecompanion.lua").read_text(encoding="utf-8")
    assert re.search(r"^\s*verbose_output\s*=\s*true", text, re.M)


def test_every_config_file_has_a_launch_line_for_doctor() -> None:
    files = {str(p.relative_to(CONFIGS)) for p in CONFIGS.rglob("*") if p.is_file() and p.name != "README.md"}
    assert files == {entry.config for entry in EDITORS if entry.config}


def test_the_clients_driven_for_real_name_their_minimum_versions() -> None:
    tested = {entry.editor: f"{entry.tested}; {entry.requires}" for entry in EDITORS}
    assert "Neovim >= 0.11" in tested["Neovim + CodeCompanion.nvim"]
    assert "Emacs >= 29.1" in tested["Emacs + agent-shell"]
    assert "Python >= 3.14" in tested["toad"]
