"""benchmarks/RESULTS.md is generated from benchmarks/results/ and speaks of the product alone."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from suite import BENCHMARKS, RESULTS_DIR, RESULTS_MD, render_results  # noqa: E402

# Who ran what when is not a result: no people, teams, branches or working sessions.
NOT_THE_PRODUCT = re.compile(
    r"(?-i:\bSession \d)|\bsessions? of work|\blead\b|\bbranch(es)?\b|\bengineers?\b|\bhelpers?\b|\bteams?\b"
    r"|\bwork ?tree\b|\bmerged?\b|\bsomeone\b|\bwe\b|(?-i:\bI\b)|\bmine\b",
    re.IGNORECASE,
)


def test_results_md_is_what_the_results_files_generate() -> None:
    assert RESULTS_MD.read_text(encoding="utf-8") == render_results(), (
        "RESULTS.md differs from benchmarks/results/: run `python -m benchmarks --render`"
    )


@pytest.mark.parametrize("path", [RESULTS_MD, *sorted(RESULTS_DIR.glob("*.json"))], ids=lambda p: p.name)
def test_results_name_no_people_teams_branches_or_working_sessions(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert [m.group(0) for m in NOT_THE_PRODUCT.finditer(text)] == []


def test_the_name_check_catches_a_diary_heading() -> None:
    assert NOT_THE_PRODUCT.search("## Session 4 lead re-runs (clients branch)") is not None
    assert NOT_THE_PRODUCT.search("spawn -> session/new from the installed wheel") is None


def test_every_benchmark_script_has_a_section_and_every_section_a_script() -> None:
    scripts = {p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py")}
    listed = {b.name for b in BENCHMARKS if b.argv[0].endswith(".py")}
    assert scripts == listed


def test_the_hostile_repository_section_shows_the_worst_event_loop_stall() -> None:
    text = RESULTS_MD.read_text(encoding="utf-8")
    section = text.split("## A hostile repository", 1)[1].split("\n## ", 1)[0]
    assert "worst event-loop stall: hostile repository" in section
    assert "worst event-loop stall: empty repository" in section
