"""The README is a front page, and what it and the docs pages point at exists.

The docs site's own check (`mkdocs build --strict`, links and anchors between pages) runs in `.ci/run`;
these are the file-level checks that need no site build: the README's length, its links (GitHub renders
them, the site does not), the repository paths the pages name, and which clients the README says were
driven for real.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.console.editor_launch import EDITORS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
README_MAX_WORDS = 2_500

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
# A backticked repository path: a top-level folder of the repository, then more path (no globs or
# placeholders: `tests/**` and `sessions/<id>/...` are patterns, not files).
REPO_DIRS = [*sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")), ".ci"]
CODE_PATH = re.compile(r"`((?:" + "|".join(map(re.escape, REPO_DIRS)) + r")/[^`\s*<>{}]*)`")


def _words(text: str) -> int:
    return len(text.split())


def _slug(heading: str) -> str:
    # The anchor MkDocs (toc) and GitHub give a heading: lower case, punctuation dropped, spaces -> '-'.
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s+", "-", text)


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"(?m)^#{1,6}\s+(.+?)\s*$", text)}


def _broken_links(page: Path) -> list[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
    broken = []
    for match in LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading with that anchor")
    return broken


def test_the_readme_is_a_front_page_of_at_most_2500_words() -> None:
    count = _words(README.read_text(encoding="utf-8"))
    assert count <= README_MAX_WORDS, f"README.md has {count} words: move the detail to a docs/ page"


def test_the_readme_puts_the_two_commands_within_its_first_250_words() -> None:
    text = README.read_text(encoding="utf-8")
    demo = text.index("continual-acp demo")
    tests = text.index("bash .ci/run")
    assert _words(text[:tests]) <= 250
    assert demo < tests


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    assert _broken_links(page) == []


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = sorted({m.group(1) for m in CODE_PATH.finditer(text) if not (ROOT / m.group(1)).exists()})
    assert missing == []


def test_the_readme_names_the_clients_driven_for_real_and_no_client_first() -> None:
    text = README.read_text(encoding="utf-8")
    [driven] = [p for p in text.split("\n\n") if p.startswith("**What is driven for real here**")]
    names = {
        "acpx": "acpx",
        "toad": "toad",
        "Neovim + CodeCompanion.nvim": "CodeCompanion",
        "Emacs + agent-shell": "agent-shell",
    }
    real = {entry.editor for entry in EDITORS if not entry.tested.startswith("not ")}
    assert real == set(names), "a client was driven (or stopped being): update the README and this test"
    assert [name for name in names.values() if name not in driven] == []
    assert "Zed first" not in text


def test_the_install_page_says_driven_exactly_for_the_clients_run_for_real() -> None:
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    rows = {
        cells[0]: cells[2]
        for line in text.splitlines()
        if line.startswith("| ") and len(cells := [c.strip() for c in line.strip("|").split("|")]) == 3
    }
    said = {editor: rows[editor] for editor in (e.editor for e in EDITORS) if editor in rows}
    assert len(said) >= 8
    for entry in EDITORS:
        if entry.editor in said:
            assert said[entry.editor].startswith("yes") == (not entry.tested.startswith("not ")), entry.editor


def _table(page: Path, heading: str) -> list[list[str]]:
    text = page.read_text(encoding="utf-8")
    # The first table after the heading: its header, its separator, then rows up to the first other line.
    lines = text[text.index(f"## {heading}\n") :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    block = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    return [[cell.strip() for cell in row.strip().strip("|").split(" | ")] for row in block[2:]]


def test_the_protocol_page_names_every_session_capability_initialize_advertises() -> None:
    # The "advertised to whom" table against the golden `initialize` answer (itself pinned to the builder).
    golden = json.loads((ROOT / "tests" / "golden" / "initialize_response.json").read_text(encoding="utf-8"))
    capabilities = golden["agentCapabilities"]
    rows = _table(ROOT / "docs" / "protocol.md", "What is advertised to whom")
    named: set[str] = set()
    for feature, advertised, _sent_to in rows:
        if advertised == "`sessionCapabilities`":
            named |= {name.rsplit("/", 1)[-1] for name in re.findall(r"`([\w/]+)`", feature)}
        elif "sessionCapabilities." in advertised:
            named |= set(re.findall(r"\.(\w+)", advertised))
    assert named == set(capabilities["sessionCapabilities"])
    [quiescence] = [row for row in rows if row[0] == "`_harness/quiescence` notification"]
    assert quiescence[1] == '`_meta["continual-acp"].notifications`'
    assert capabilities["_meta"]["continual-acp"]["notifications"] == ["_harness/quiescence"]


def test_the_referee_table_says_not_covered_on_local_exactly_where_the_boundary_matrix_expects_it() -> None:
    # The matrix marks each attack the local backend lets through as a strict expected failure (`OPEN`);
    # the per-backend table on the kernels page must name the same ones, and no others, as not covered.
    matrix = (ROOT / "tests" / "referee" / "test_referee_boundary_matrix.py").read_text(encoding="utf-8")
    open_on_local = set(re.findall(r'\("([\w-]+)", "local", user\)', matrix))
    rows = _table(ROOT / "docs" / "kernels.md", "The referee, per backend")
    not_covered = [what for what, local, *_ in rows if local.startswith("**not covered**")]
    assert len(open_on_local) == len(not_covered) == 2
    for attack in open_on_local:
        assert [what for what in not_covered if attack.replace("-", " ") in what] != [], attack


def test_the_docs_site_builds_strictly_with_no_broken_link_or_anchor(tmp_path: Path) -> None:
    # The same build as .ci/run's docs step (installed by the `docs` extra; skipped without it). No
    # --quiet: it hides the warnings --strict counts, and the build then passes with a broken link.
    pytest.importorskip("material", reason="mkdocs-material is not installed: pip install -e '.[docs]'")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=60,
    )
    assert build.returncode == 0, build.stderr
