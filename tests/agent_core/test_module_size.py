"""No agent_core module grows past 500 lines: a module that long has more than one job to split out."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "agent_core"
LIMIT = 500


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_agent_core_module_is_over_500_lines() -> None:
    offenders = sorted(
        f"{path.relative_to(PACKAGE.parent).as_posix()} ({lines} lines)"
        for path in PACKAGE.rglob("*.py")
        if (lines := _line_count(path)) > LIMIT
    )
    assert offenders == [], f"agent_core modules over {LIMIT} lines: {', '.join(offenders)}"
