"""Reading the eval's JSON-lines files (frame logs, model exchanges, harness history) as they are
left by a run that may have been killed mid-write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file (a torn or junk line is skipped; a missing file is empty)."""
    if not path.is_file():
        return []
    out: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out
