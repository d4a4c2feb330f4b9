"""Which cells follow a harness entry: its anchors, read from the rendered overview line.

An entry's anchors are what a cell would contain if it acted on the entry: a command or call the
entry quotes in backticks, a file path it names, or a skill's callable. They are read from the
line the prompt rendered, so only what the model saw counts (entry_counters.py counts them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

_MIN_ANCHOR = 3
_LINE = re.compile(r"^- \*\*.*?\*\*(?: \(candidate\))? \[`([^`]+)`[^\]]*\]( `[^`]*`)?: (\".*\")$")
_TICKS = re.compile(r"`([^`\n]{3,120})`")
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+|[\w-]+\.(?:py|toml|cfg|ini|json|ya?ml|md|txt|sh|js|ts))\b"
)
_CALLABLE = re.compile(r"\.([A-Za-z_]\w*)\(")


def line_anchors(content: str, skill_head: str | None = None) -> list[str]:
    """What in a cell shows the entry was followed: backticked commands/calls, file paths, and a
    skill's callable (`skill_head` is the rendered `module.func(args)`)."""
    found: list[str] = []
    for match in _TICKS.finditer(content):
        found.append(match.group(1).strip())
    for match in _PATH.finditer(content):
        found.append(match.group(1))
    if skill_head:
        call = _CALLABLE.search(skill_head)
        if call:
            found.append(call.group(1) + "(")
    out: list[str] = []
    for anchor in found:
        if len(anchor) >= _MIN_ANCHOR and anchor not in out:
            out.append(anchor)
    return out


def overview_anchors(overview: str) -> dict[str, list[str]]:
    """Each entry key the rendered overview shows, with its anchors (possibly none)."""
    out: dict[str, list[str]] = {}
    for line in overview.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        try:
            content = str(json.loads(match.group(3)))
        except ValueError:
            content = ""
        out.setdefault(match.group(1), line_anchors(content, match.group(2)))
    return out


def followed(code: str, anchors: Iterable[str]) -> bool:
    """True when the cell's code runs one of the anchors."""
    return any(anchor in code for anchor in anchors)
