"""What the head of a JSON-RPC line too large to parse still says: its top-level keys and its id.

An oversized line is skipped without being kept (transport.py keeps only its first bytes); its
sender still waits for an answer to that id. Clients put `"id"` and `"method"` first (the SDK
serializes `jsonrpc`, `id`, `method`, `params` in that order), so the head almost always holds them.
The scan reads only complete tokens at the object's top level; anything it cannot read is None.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["HEAD_BYTES", "LineHead", "read_head"]

HEAD_BYTES = 4096  # kept of an oversized line: ids and method names are far shorter
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?![0-9.eE])")


@dataclass(frozen=True, slots=True)
class LineHead:
    keys: frozenset[str]  # top-level keys seen in the head
    ident: int | str | None  # the top-level "id", when its whole value is in the head

    @property
    def is_response(self) -> bool:
        return "method" not in self.keys and bool(self.keys & {"result", "error"})


def _string_end(data: bytes, start: int) -> int:
    """The index just past the JSON string opening at `start`, or -1 when it is cut off."""
    i = start + 1
    while i < len(data):
        byte = data[i]
        if byte == 0x5C:  # backslash: skip the escaped byte
            i += 2
            continue
        if byte == 0x22:
            return i + 1
        i += 1
    return -1


def read_head(head: bytes) -> LineHead:
    """The top-level keys and id found in `head`, the first bytes of one JSON object."""
    keys: set[str] = set()
    ident: int | str | None = None
    i = len(head) - len(head.lstrip())
    if not head[i : i + 1] == b"{":
        return LineHead(frozenset(), None)
    depth, i, expect_key = 1, i + 1, True
    pending_key: str | None = None
    while i < len(head) and depth > 0:
        byte = head[i]
        if byte == 0x22:  # a string: a key at depth 1, or a value
            end = _string_end(head, i)
            if end < 0:
                break
            if depth == 1 and expect_key:
                try:
                    pending_key = json.loads(head[i:end])
                except ValueError:
                    break
                keys.add(pending_key)
            elif depth == 1 and pending_key == "id":
                try:
                    ident = json.loads(head[i:end])
                except ValueError:
                    ident = None
            i = end
            continue
        if byte in b"{[":
            depth += 1
        elif byte in b"}]":
            depth -= 1
        elif byte == 0x3A and depth == 1:  # ':' -- a value follows
            expect_key = False
        elif byte == 0x2C and depth == 1:  # ',' -- the next key follows
            expect_key, pending_key = True, None
        elif depth == 1 and not expect_key and pending_key == "id" and (byte == 0x2D or 0x30 <= byte <= 0x39):
            match = _NUMBER.match(head, i)
            if match is None or match.end() == len(head):
                break  # cut off (or not an integer): the id is not known
            ident = int(match.group())
            i = match.end()
            continue
        i += 1
    return LineHead(frozenset(keys), ident)
