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

from acp_server.errors import AcpError

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


def select(
    entries: Mapping[str, Mapping[str, object]], kind: str | None, after: tuple[str, str] | None, limit: int
) -> Page:
    """The (kind, key) pairs of one page, in (kind, key) order, and the last one when more follow."""
    kinds = [kind] if kind is not None else sorted(entries)
    ordered: list[tuple[str, str]] = [(k, key) for k in kinds for key in sorted(entries.get(k, {}))]
    start = bisect_right(ordered, after) if after is not None else 0
    page = ordered[start : start + limit]
    more = start + limit < len(ordered)
    return Page(page, page[-1] if more and page else None, len(ordered))
