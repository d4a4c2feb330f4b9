"""Pages of `_harness/state`: which entries one answer carries and the cursor to the next page.

A large harness (thousands of entries) answered whole is megabytes of JSON and seconds of encoding,
so an answer carries at most `limit` entries in (kind, key) order and a `nextCursor` when more
follow (the tombstones ride on the first page only). The cursor is keyset, not an offset: it names the last (kind, key) sent, so an entry created,
changed or removed between two pages never shifts the rest. It also names the query it belongs to
(session, scope, asOf, kind): a cursor replayed against another query, or text that is not a cursor
this server wrote, is refused with -32602 instead of silently answering the wrong page.
"""

from __future__ import annotations

import base64
import binascii
import json
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

from acp_server.protocol.errors import AcpError

# The default answers a harness of ordinary size (hundreds of entries) whole, as before paging.
DEFAULT_LIMIT = 500
MAX_LIMIT = 2000
_VERSION = 1


@dataclass(frozen=True)
class StateQuery:
    """What a page is a page of: a cursor is only valid for the same query."""

    session_id: str
    scope: str
    as_of: str | None
    kind: str | None

    def _tag(self) -> list[object]:
        return [self.session_id, self.scope, self.as_of, self.kind]


def encode_cursor(query: StateQuery, last: tuple[str, str]) -> str:
    raw = json.dumps([_VERSION, query._tag(), list(last)], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(query: StateQuery, cursor: str) -> tuple[str, str]:
    """The (kind, key) after which the page starts; -32602 for a foreign or garbled cursor."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, tag, last = json.loads(raw)
        kind, key = last
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise AcpError.invalid_params(
            "_harness/state: cursor is not one this server gave (pass the nextCursor of the last answer, "
            "or no cursor for the first page)"
        ) from None
    if version != _VERSION or not isinstance(kind, str) or not isinstance(key, str):
        raise AcpError.invalid_params("_harness/state: cursor is not one this server gave")
    if tag != query._tag():
        raise AcpError.invalid_params(
            "_harness/state: cursor belongs to another query (its sessionId, scope, asOf and kind must be "
            "the ones of the request that returned it); start again without a cursor"
        )
    return kind, key


@dataclass(frozen=True)
class Page:
    keys: list[tuple[str, str]]
    next_last: tuple[str, str] | None
    total: int


# A kind's entries dict (by identity, held) -> its keys sorted. States are immutable and a write
# copies only the kinds it touches, so walking the pages of a large harness sorts each kind once.
_SORTED: dict[int, tuple[Mapping[str, object], list[str]]] = {}


def _sorted_keys(items: Mapping[str, object]) -> list[str]:
    hit = _SORTED.get(id(items))
    if hit is not None and hit[0] is items:
        return hit[1]
    keys = sorted(items)
    if len(_SORTED) >= 16:
        _SORTED.pop(next(iter(_SORTED)))
    _SORTED[id(items)] = (items, keys)
    return keys


def select(
    entries: Mapping[str, Mapping[str, object]], kind: str | None, after: tuple[str, str] | None, limit: int
) -> Page:
    """The (kind, key) pairs of one page, in (kind, key) order, and the last one when more follow."""
    kinds = [kind] if kind is not None else sorted(entries)
    sizes = [len(entries.get(k, {})) for k in kinds]
    page: list[tuple[str, str]] = []
    for k, size in zip(kinds, sizes, strict=True):
        if not size or (after is not None and k < after[0]):
            continue
        keys = _sorted_keys(entries[k])
        start = bisect_right(keys, after[1]) if after is not None and k == after[0] else 0
        page += [(k, key) for key in keys[start : start + limit - len(page)]]
        if len(page) >= limit:
            break
    more = len(page) >= limit and _any_after(entries, kinds, page[-1])
    return Page(page, page[-1] if more else None, sum(sizes))


def _any_after(entries: Mapping[str, Mapping[str, object]], kinds: list[str], last: tuple[str, str]) -> bool:
    """Whether any (kind, key) sorts after `last`."""
    for k in kinds:
        if k < last[0] or not entries.get(k):
            continue
        if k > last[0]:
            return True
        keys = _sorted_keys(entries[k])
        if bisect_right(keys, last[1]) < len(keys):
            return True
    return False
