"""The on-disk text of a project store: one reviewable file per entry, and git conflict markers.

An entry file is front matter (one `key: <JSON value>` line per field, in a fixed order) between
`---` lines, then the content verbatim. JSON values keep every field unambiguous on one line, so a
`git diff` of a refinement shows exactly the fields that moved, and the same entry always renders
to the same bytes. Files are written atomically (temp file + rename) with mode 0644: they are
committed and shared, unlike the private stores under the data home.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from harness_store.models import HarnessEntry
from host_base import private_files

FIELDS: tuple[str, ...] = (
    "id",
    "kind",
    "title",
    "scope",
    "path",
    "trust",
    "source",
    "version",
    "created_at",
    "updated_at",
    "reference",
    "arguments",
    "metadata",
    "examples",
    "evidence",
)
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
CONFLICT_START = "<<<<<<< "
CONFLICT_BASE = "||||||| "
CONFLICT_MID = "======="
CONFLICT_END = ">>>>>>> "


class EntryFileError(ValueError):
    """An entry file that cannot be read as an entry (the message says why)."""


def file_name(entry_id: str) -> str:
    """The file name of an entry id: the id itself when it is a plain name, else percent-encoded."""
    return f"{entry_id}.md" if _SAFE_NAME.match(entry_id) else f"{quote(entry_id, safe='')}.md"


def id_from_file_name(name: str) -> str:
    """The entry id a file name stands for (the front matter's `id` is authoritative)."""
    return unquote(name[:-3] if name.endswith(".md") else name)


def render_entry(entry: HarnessEntry) -> str:
    """The entry's file text (stable: same entry, same bytes)."""
    data = entry.model_dump(mode="json")
    lines = ["---"]
    for name in FIELDS:
        lines.append(f"{name}: {json.dumps(data[name], ensure_ascii=False, sort_keys=True)}")
    lines.append("---")
    return "\n".join(lines) + "\n" + entry.content + "\n"


def parse_entry(text: str) -> HarnessEntry:
    """Read an entry file's text; raises `EntryFileError` naming what is wrong."""
    if not text.startswith("---\n"):
        raise EntryFileError("no front matter (the file must start with a --- line)")
    end = text.find("\n---\n", 3)
    if end < 0:
        raise EntryFileError("the front matter is not closed with a --- line")
    fields: dict[str, Any] = {}
    for number, line in enumerate(text[4:end].split("\n"), start=2):
        if not line.strip():
            continue
        key, sep, raw = line.partition(": ")
        if not sep:
            raise EntryFileError(f"line {number}: expected 'key: <JSON value>'")
        try:
            fields[key.strip()] = json.loads(raw)
        except ValueError as exc:
            raise EntryFileError(f"line {number} ({key.strip()}): not a JSON value: {exc}") from None
    body = text[end + 5 :]
    fields["content"] = body[:-1] if body.endswith("\n") else body
    try:
        return HarnessEntry.model_validate(fields)
    except ValueError as exc:
        raise EntryFileError(f"not a valid entry: {exc}") from None


def has_conflict_markers(text: str) -> bool:
    """True when the text holds a git conflict (a `<<<<<<< ` line)."""
    return any(line.startswith(CONFLICT_START) for line in text.split("\n"))


def split_conflict(text: str) -> tuple[str, str]:
    """The two sides ("ours", "theirs") of a file with git conflict markers (diff3 bases dropped)."""
    ours: list[str] = []
    theirs: list[str] = []
    side = "both"
    for line in text.split("\n"):
        if line.startswith(CONFLICT_START):
            side = "ours"
        elif line.startswith(CONFLICT_BASE) and side == "ours":
            side = "base"
        elif line == CONFLICT_MID and side in ("ours", "base"):
            side = "theirs"
        elif line.startswith(CONFLICT_END) and side == "theirs":
            side = "both"
        elif side == "both":
            ours.append(line)
            theirs.append(line)
        elif side == "ours":
            ours.append(line)
        elif side == "theirs":
            theirs.append(line)
    return "\n".join(ours), "\n".join(theirs)


def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` (`private_files.write_atomic`; mode 0644: a repository file; the
    temp name matches `.*.tmp`, which the harness's .gitignore keeps out of commits)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    private_files.write_atomic(path, text, mode=0o644)
