"""Text from the model, the user, the kernel and files is untrusted: make it always encodable.

Python strings can hold lone UTF-16 surrogates (a JSON `"\\udc80"` escape decodes to one, and an
emoji whose two halves arrive in two SSE chunks is two lone halves until joined). Such a string
cannot be encoded as UTF-8, so one of them would break every later transcript write or stdout frame.
`scrub` joins valid surrogate pairs and replaces lone ones with U+FFFD; `StreamJoiner` does the same
for a stream of deltas, holding back a trailing high surrogate until its partner arrives.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD (O(1) when clean)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    # UTF-16 round trip: "surrogatepass" writes the halves as they are, decoding pairs them up and
    # "replace" turns every half without a partner into U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def scrub_value(value: Any) -> Any:
    """`scrub` applied to every string (keys too) in a JSON-like value; the same object back when
    nothing needed changing, so the clean case (nearly always) allocates nothing."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = scrub(key) if isinstance(key, str) else key
            new_item = scrub_value(item)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if isinstance(value, list | tuple):
        items = [scrub_value(item) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
        return value
    return value


class StreamJoiner:
    """Feeds deltas through `scrub`, keeping a trailing high surrogate for the next delta."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, piece: str) -> str:
        """The part of `pending + piece` that is safe to emit now."""
        text = self._pending + piece
        self._pending = ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._pending = text[:-1], text[-1]
        return scrub(text)

    def flush(self) -> str:
        """Whatever is still held back (a lone high surrogate becomes U+FFFD)."""
        text, self._pending = self._pending, ""
        return scrub(text)


# C0/C1 controls and the bidirectional marks, embeddings, overrides and isolates: a title is one line
# an editor lists; an escape sequence or a right-to-left override in it would disguise what it says.
_NOT_SHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def one_line(text: str) -> str:
    """`text` as one line of plain text: control and bidirectional characters dropped (whitespace
    ones become spaces), whitespace collapsed."""
    return " ".join(_NOT_SHOWN.sub(lambda m: " " if m.group().isspace() else "", text).split())
