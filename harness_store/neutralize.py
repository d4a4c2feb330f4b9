"""Which parts of an entry the prompt rendering neutralizes, so `/harness` can flag it.

The overview renders entry text as quoted, bounded data (overview.py): control and format
characters become visible escapes, tag-like `<` a look-alike, and content is cut to a bound. This
module answers the question a reviewer asks next — *did this entry need that?* — with the reasons,
so hostile or damaged content is visible as such instead of being quietly defused. It also names
text that imitates a message role, a prompt header or an instruction override, which the quoting
defuses but a person should see.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from harness_store.models import HarnessEntry

CONTENT_CHARS = 400  # what the overview shows of an entry's content (overview._ENTRY_CHARS)
TITLE_CHARS = 120  # and of its title (the injection-safe overview's _TITLE_CHARS)
_TAG_OPEN = re.compile(r"<(?=[/!|?A-Za-z])")
_ROLE = re.compile(r"(?im)^\s*(?:#+\s*)?(?:system|assistant|user|developer|tool)\s*(?::|prompt\b|message\b)")
_HEADER = re.compile(r"(?im)^\s*#{1,6}\s*(?:system|instructions?|base rules|rules)\b")
_OVERRIDE = re.compile(
    r"(?i)\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:the\s+)?"
    r"(?:previous|prior|above|earlier|system|base)\s+(?:instructions|rules|prompts?|messages)"
)


# ASCII has no format (Cf) characters; its controls (Cc) that are not whitespace to `str.isspace`
# are these. One regex pass instead of a per-character loop: `/harness` checks every entry, and
# text joined with newlines is never `isprintable()`, so 10,000 entries took ~1 s on that loop.
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")


def _characters(text: str) -> tuple[bool, bool]:
    control = fmt = False
    if text.isascii():
        return _ASCII_CONTROL.search(text) is not None, False
    for char in text:
        if char.isspace():
            continue
        category = unicodedata.category(char)
        if category == "Cf":
            fmt = True
        elif category[0] == "C":
            control = True
    return control, fmt


# Entry (by identity, held so the id stays its own) -> its reasons: entries are frozen, and `/harness`
# asks this of every entry, 10,000 of them in a large harness, on every call.
_BY_ENTRY: dict[int, tuple[HarnessEntry, tuple[str, ...]]] = {}


def neutralized(entry: HarnessEntry) -> tuple[str, ...]:
    """The reasons the prompt shows this entry altered (empty: it is shown as written)."""
    hit = _BY_ENTRY.get(id(entry))
    if hit is not None and hit[0] is entry:
        return hit[1]
    reasons = _reasons(
        entry.title,
        entry.content,
        "\n".join([entry.path, *(str(v) for v in entry.reference.values()), *entry.arguments]),
    )
    if len(_BY_ENTRY) >= 65536:
        _BY_ENTRY.clear()
    _BY_ENTRY[id(entry)] = (entry, reasons)
    return reasons


@lru_cache(maxsize=65536)
def _reasons(title: str, content: str, rest: str) -> tuple[str, ...]:
    # Cached on the text (entries are immutable): a repeated `/harness` over 10,000 entries
    # re-checks none of them.
    text = f"{title}\n{content}\n{rest}"
    reasons: list[str] = []
    control, fmt = _characters(text)
    if control:
        reasons.append("control characters escaped")
    if fmt:
        reasons.append("invisible or bidi characters escaped")
    if _TAG_OPEN.search(text):
        reasons.append("tag-like markup neutralized")
    if _ROLE.search(text) or _HEADER.search(text):
        reasons.append("imitates a message role or prompt header")
    if _OVERRIDE.search(text):
        reasons.append("tries to override instructions")
    if len(" ".join(title.split())) > TITLE_CHARS:
        reasons.append(f"title cut to {TITLE_CHARS} characters in the prompt")
    if len(" ".join(content.split())) > CONTENT_CHARS:
        reasons.append(f"content cut to {CONTENT_CHARS} characters in the prompt")
    return tuple(reasons)


def flag(entry: HarnessEntry) -> str:
    """The `/harness` marker for an entry: `""`, or `" ⚠ neutralized: <reasons>"`."""
    reasons = neutralized(entry)
    return f" ⚠ neutralized: {', '.join(reasons)}" if reasons else ""
