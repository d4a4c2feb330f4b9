"""One readable line diff per edit: the entry's view text before and after, as tagged lines."""

from __future__ import annotations

import difflib
from typing import Any

CONTEXT_LINES = 3
VERSION_LINE = "- version: "  # harness_store.views.render_view's header line


def _lines(view: str | None) -> list[str]:
    # The version line changes on every write; the page shows versions beside the diff instead.
    return [line for line in (view or "").splitlines() if not line.startswith(VERSION_LINE)]


def line_diff(before: str | None, after: str | None) -> list[dict[str, Any]]:
    """`[{op, text}]` with op `=` (context), `-`, `+` or `@` (a hunk header); empty when equal.

    A create diffs against nothing (all `+`), a delete against nothing after (all `-`).
    """
    old = _lines(before)
    new = _lines(after)
    if old == new:
        return []
    lines: list[dict[str, Any]] = []
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(CONTEXT_LINES):
        first, last = group[0], group[-1]
        lines.append(
            {
                "op": "@",
                "text": f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@",
            }
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend({"op": "=", "text": text} for text in old[i1:i2])
                continue
            if tag in ("replace", "delete"):
                lines.extend({"op": "-", "text": text} for text in old[i1:i2])
            if tag in ("replace", "insert"):
                lines.extend({"op": "+", "text": text} for text in new[j1:j2])
    return lines
