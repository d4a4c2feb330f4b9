"""The one rule for a cell's title: what a tool card, a permission request and the transcript show."""

from __future__ import annotations

TITLE_LIMIT = 80


def cell_title(code: str, title: str | None) -> str:
    """The model's title, else the first comment line, else the first statement (bounded)."""
    if title and title.strip():
        chosen = title.strip()
    else:
        lines = [line.strip() for line in code.splitlines() if line.strip()]
        # A `%%bash` header says nothing about what the cell does; the command after it does.
        lines = [line for line in lines if not line.startswith("%%")] or lines
        comment = next(
            (line.lstrip("#").strip() for line in lines if line.startswith("#") and line.lstrip("#").strip()),
            None,
        )
        statement = next((line for line in lines if not line.startswith("#")), "empty cell")
        chosen = comment or statement
    chosen = " ".join(chosen.split())
    return chosen if len(chosen) <= TITLE_LIMIT else chosen[: TITLE_LIMIT - 1] + "…"
