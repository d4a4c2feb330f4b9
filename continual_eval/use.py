"""Use, not just presence: which harness entries a session was shown, which it followed, which are noise.

An entry is **shown** when the harness section of the session's first agent request lists it
(`- **title** [`id`]...: "content"`, as `harness_store.overview` renders it). It is **followed**
when one of its *markers* turns up in the code of a cell the session ran: a span the entry quotes in
backticks (a command, a call, a file), a path-like word (`tools/clean-cache`, `check.py`), or a
skill's callable. An entry with no marker can be shown but never counted as followed.

An entry is **noise** when it is content-free (no marker and fewer than four words of its own beyond
the title's) or a duplicate (the same words as an entry listed before it, or the same title).
These are text rules, computed from the traces alone; a real lesson phrased without a command or a
path reads as unverifiable rather than unfollowed, which the docs say.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from continual_eval.scripted import harness_section

ENTRY_LINE = re.compile(
    r"^- \*\*(?P<title>.+?)\*\*(?: \(candidate\))? \[`(?P<id>[^`]+)`[^\]]*\](?P<rest>.*)$"
)
SKILL_CALL = re.compile(r"^ `(?P<module>[\w.]+)\.(?P<func>\w+)\(")
BACKTICKS = re.compile(r"`([^`\n]{2,200})`")
PATHLIKE = re.compile(
    r"(?<![\w/.-])((?:\./|\w[\w.-]*/)[\w./-]+|[\w-]+\.(?:py|sh|toml|json|md|txt|cfg|ini|ya?ml|lock))(?![\w/-])"
)
WORD = re.compile(r"[a-z0-9]{3,}")
STOPWORDS = frozenset(
    "the and for with this that you are not but from have has was were when then than use uses used "
    "run runs always never should must can will all any its it's into only also".split()
)


@dataclass(frozen=True)
class ShownEntry:
    id: str
    title: str
    content: str
    call: str | None = None  # a skill's `module.callable`


def shown_entries(system_prompt: str) -> list[ShownEntry]:
    """The entries a system prompt's harness section lists, in order."""
    out: list[ShownEntry] = []
    for line in harness_section(system_prompt).splitlines():
        match = ENTRY_LINE.match(line)
        if not match:
            continue
        rest = match.group("rest")
        call = SKILL_CALL.match(rest)
        _, sep, quoted = rest.partition(": ")
        content = ""
        if sep:
            try:
                content = str(json.loads(quoted))
            except json.JSONDecodeError:
                content = quoted.strip('"')
        out.append(
            ShownEntry(
                id=match.group("id"),
                title=match.group("title"),
                content=content,
                call=f"{call.group('module')}.{call.group('func')}" if call else None,
            )
        )
    return out


def _squash(text: str) -> str:
    return " ".join(text.split())


def markers(entry: ShownEntry) -> list[str]:
    """What a cell that follows the entry would contain (whitespace-normalised)."""
    found: list[str] = []
    for span in BACKTICKS.findall(entry.content):
        found.append(_squash(span))
    for path in PATHLIKE.findall(entry.content):
        found.append(path.rstrip("."))
    if entry.call:
        found.append(entry.call.rsplit(".", 1)[-1] + "(")
    # Too short to mean anything in code ("a", "x="): dropped.
    return list(dict.fromkeys(m for m in found if len(m) >= 3))


def followed(entry: ShownEntry, cells: list[str]) -> bool:
    code = [_squash(c) for c in cells]
    return any(marker in cell for marker in markers(entry) for cell in code)


def _own_words(entry: ShownEntry) -> set[str]:
    title = set(WORD.findall(entry.title.lower()))
    return {w for w in WORD.findall(entry.content.lower()) if w not in STOPWORDS and w not in title}


def noise(entries: list[ShownEntry]) -> list[str]:
    """Ids of the content-free and duplicate entries among `entries` (the first of equals is kept)."""
    out: list[str] = []
    seen_text: set[str] = set()
    seen_titles: set[str] = set()
    for entry in entries:
        text = " ".join(WORD.findall(entry.content.lower()))
        title = entry.title.strip().lower()
        content_free = not markers(entry) and len(_own_words(entry)) < 4
        duplicate = (text and text in seen_text) or title in seen_titles
        if content_free or duplicate:
            out.append(entry.id)
        seen_text.add(text)
        seen_titles.add(title)
    return out
