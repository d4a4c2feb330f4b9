"""A word index of one kind's entries, so ranking 10,000 of them for a prompt reads only the entries
that share a word with it.

The overview ranks by (relevance, trust, recency). A pass over every entry costs ~10 ms at 10,000
entries on this 2-core machine (4x that under load), paid on every model request; with the index
it is the postings of the prompt's words plus the `limit` newest of each trust rank. An index is
built the second time the same entries dict is ranked (the prompt's view is reused while no store
changes: `ScopeStates.prompt_view`); a dict seen once, such as a `/harness <kind>` view, is ranked
by the plain pass. States are immutable once built, so a dict's identity names its content; the
caches hold the dicts they describe, so an id is never reused while cached.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness_store.models import HarnessEntry

_BOUND = 8  # dicts kept (a few sessions' prompt views, four kinds each)


@dataclass(frozen=True)
class RankIndex:
    postings: dict[str, list[str]]  # word -> keys of visible entries holding it
    by_rank: dict[int, list[str]]  # trust rank -> visible keys, newest first
    ranks: dict[str, int]  # key -> trust rank (visible entries only)
    position: dict[str, int]  # key -> place in newest-first order (recency as one int lookup)
    size: int  # len(items) when built: a dict grown or shrunk since is indexed again
    order: list[str]  # visible keys, newest first (what `position` numbers)


_seen: dict[int, dict[str, HarnessEntry]] = {}
_indexes: dict[int, tuple[dict[str, HarnessEntry], RankIndex]] = {}
# Lineage (the kind) -> the dict last indexed for it. A write copies the kind's dict and changes a
# few entries, so the next prompt's dict is that one plus a few edits: its index is derived from the
# last one (the touched postings copied, the rest shared) instead of a plain pass over every entry.
_latest: dict[str, tuple[dict[str, HarnessEntry], RankIndex]] = {}
_MAX_DERIVED_CHANGES = 64


def _remember(cache: dict[int, object], key: int, value: object) -> None:
    if len(cache) >= _BOUND:
        cache.pop(next(iter(cache)))
    cache[key] = value


def index_for(
    items: dict[str, HarnessEntry],
    trust_rank: dict[str, int],
    words_of: Callable[[HarnessEntry], frozenset[str]],
    lineage: str | None = None,
) -> RankIndex | None:
    """The index of `items`; derived from the last index of its `lineage` when `items` differs from
    that dict by a few entries; else None the first time this dict is seen (rank it with a plain pass)."""
    ident = id(items)
    hit = _indexes.get(ident)
    if hit is not None and hit[0] is items and hit[1].size == len(items):
        return hit[1]
    base = _latest.get(lineage) if lineage is not None else None
    if base is not None and lineage is not None:
        derived = _derive(base[0], base[1], items, trust_rank, words_of)
        if derived is not None:
            _remember(_indexes, ident, (items, derived))  # type: ignore[arg-type]
            _latest[lineage] = (items, derived)
            return derived
    if _seen.get(ident) is not items:
        _remember(_seen, ident, items)  # type: ignore[arg-type]
        return None
    postings: dict[str, list[str]] = {}
    by_rank: dict[int, list[str]] = {}
    ranks: dict[str, int] = {}
    for key, entry in items.items():
        rank = trust_rank.get(entry.trust)
        if rank is None:
            continue
        ranks[key] = rank
        by_rank.setdefault(rank, []).append(key)
        for word in words_of(entry):
            postings.setdefault(word, []).append(key)
    for keys in by_rank.values():
        keys.sort(key=lambda k: (items[k].updated_at, k), reverse=True)
    newest = sorted(ranks, key=lambda k: (items[k].updated_at, k), reverse=True)
    position = {key: place for place, key in enumerate(newest)}
    index = RankIndex(postings, by_rank, ranks, position, len(items), newest)
    _remember(_indexes, ident, (items, index))  # type: ignore[arg-type]
    if lineage is not None:
        _latest[lineage] = (items, index)
    return index


def _changes(
    old: dict[str, HarnessEntry], new: dict[str, HarnessEntry]
) -> tuple[list[str], list[str]] | None:
    """(keys whose old entry leaves, keys whose new entry joins), or None past the bound."""
    if abs(len(new) - len(old)) > _MAX_DERIVED_CHANGES:
        return None
    leaving: list[str] = []
    joining: list[str] = []
    kept = 0
    for key, entry in new.items():
        before = old.get(key)
        if before is entry:
            kept += 1
            continue
        if before is not None:
            kept += 1
            leaving.append(key)
        joining.append(key)
        if len(joining) > _MAX_DERIVED_CHANGES:
            return None
    if kept < len(old):  # keys gone from the new dict: one pass over the old one finds them
        leaving += [key for key in old if key not in new]
        if len(leaving) > 2 * _MAX_DERIVED_CHANGES:
            return None
    return leaving, joining


def _derive(
    old_items: dict[str, HarnessEntry],
    old: RankIndex,
    items: dict[str, HarnessEntry],
    trust_rank: dict[str, int],
    words_of: Callable[[HarnessEntry], frozenset[str]],
) -> RankIndex | None:
    """The index of `items` from `old`'s when few entries differ and every joining entry is newer
    than all of `old`'s (a write stamps what it writes now); else None."""
    changes = _changes(old_items, items)
    if changes is None:
        return None
    leaving, joining = changes
    visible = [k for k in joining if trust_rank.get(items[k].trust) is not None]
    visible.sort(key=lambda k: (items[k].updated_at, k))  # oldest first: each goes to the front
    if visible and old.order:
        newest = old.order[0]
        if (items[visible[0]].updated_at, visible[0]) <= (old_items[newest].updated_at, newest):
            return None  # would land inside the recency order, not at its front: index afresh
    postings = dict(old.postings)
    by_rank = dict(old.by_rank)
    ranks = dict(old.ranks)
    copied: set[object] = set()

    def own(table: dict[Any, list[str]], key: Any) -> list[str]:
        # Copy-on-write: the lists `old` holds are never changed.
        if (id(table), key) not in copied:
            copied.add((id(table), key))
            table[key] = list(table.get(key, ()))
        return table[key]

    gone: set[str] = set()
    for key in leaving:
        rank = ranks.pop(key, None)
        if rank is None:
            continue  # was not visible: in no list
        gone.add(key)
        own(by_rank, rank).remove(key)
        for word in words_of(old_items[key]):
            own(postings, word).remove(key)
    for key in visible:
        rank = trust_rank[items[key].trust]
        ranks[key] = rank
        own(by_rank, rank).insert(0, key)
        for word in words_of(items[key]):
            own(postings, word).append(key)
    order = (
        [*reversed(visible), *(k for k in old.order if k not in gone)]
        if gone
        else [*reversed(visible), *old.order]
    )
    position = {key: place for place, key in enumerate(order)}
    return RankIndex(postings, by_rank, ranks, position, len(items), order)


def ranked_from_index(
    items: dict[str, HarnessEntry], index: RankIndex, query_words: frozenset[str], limit: int
) -> list[tuple[str, HarnessEntry]]:
    """The same choice as the plain pass: by (relevance, trust, recency), `limit` at most."""
    counts: Counter[str] = Counter()
    for word in query_words:
        counts.update(index.postings.get(word, ()))  # counted in C
    buckets: dict[tuple[int, int], list[str]] = {}
    ranks = index.ranks
    for key, relevance in counts.items():
        buckets.setdefault((-relevance, ranks[key]), []).append(key)
    chosen: list[tuple[str, HarnessEntry]] = []
    for group in sorted(buckets):
        need = limit - len(chosen)
        if need <= 0:
            return chosen
        newest = heapq.nsmallest(need, buckets[group], key=index.position.__getitem__)
        chosen.extend((k, items[k]) for k in newest)
    for rank in sorted(index.by_rank):  # then the entries sharing no word, trust then recency
        for key in index.by_rank[rank]:
            if len(chosen) >= limit:
                return chosen
            if key not in counts:
                chosen.append((key, items[key]))
    return chosen
