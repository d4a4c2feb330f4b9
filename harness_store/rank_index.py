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
from dataclasses import dataclass, field

from harness_store.models import HarnessEntry

_BOUND = 8  # dicts kept (a few sessions' prompt views, four kinds each)


@dataclass(frozen=True)
class RankIndex:
    postings: dict[str, list[str]]  # word -> keys of visible entries holding it
    by_rank: dict[int, list[str]]  # trust rank -> visible keys, newest first
    ranks: dict[str, int]  # key -> trust rank (visible entries only)
    position: dict[str, int]  # key -> place in newest-first order (recency as one int lookup)
    size: int  # len(items) when built: a dict grown or shrunk since is indexed again
    newest: str | None  # the visible key with the smallest position
    # A derived index shares `postings` and `by_rank` with the one it came from and overlays them:
    dead: frozenset[str] = frozenset()  # keys whose entries there are stale (left, or changed)
    joined: frozenset[str] = frozenset()  # keys whose current entry lives in the overlay below
    extra: dict[str, list[str]] = field(default_factory=dict)  # word -> joined keys holding it
    extra_by_rank: dict[int, list[str]] = field(default_factory=dict)  # rank -> joined keys, newest first


_seen: dict[int, dict[str, HarnessEntry]] = {}
_indexes: dict[int, tuple[dict[str, HarnessEntry], RankIndex]] = {}
# Lineage (the kind) -> the dict last indexed for it. A write copies the kind's dict and changes a
# few entries, so the next prompt's dict is that one plus a few edits: its index is derived from the
# last one (an overlay of the few changes over the shared postings) instead of a plain pass.
_latest: dict[str, tuple[dict[str, HarnessEntry], RankIndex]] = {}
_MAX_DERIVED_CHANGES = 64  # per write
_MAX_OVERLAY = 256  # dead + joined keys before the next index is built afresh


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
        _indexes[ident] = _indexes.pop(ident)  # least recently used goes first, not the oldest
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
    index = RankIndex(postings, by_rank, ranks, position, len(items), newest[0] if newest else None)
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
    than all of `old`'s (a write stamps what it writes now); else None. Nothing `old` holds changes."""
    changes = _changes(old_items, items)
    if changes is None:
        return None
    leaving, joining = changes
    visible = [k for k in joining if trust_rank.get(items[k].trust) is not None]
    visible.sort(key=lambda k: (items[k].updated_at, k))  # oldest first: each goes to the front
    if visible and old.newest is not None:
        newest = old.newest
        if (items[visible[0]].updated_at, visible[0]) <= (old_items[newest].updated_at, newest):
            return None  # would land inside the recency order, not at its front: index afresh
    ranks, position = dict(old.ranks), dict(old.position)
    dead, joined = set(old.dead), set(old.joined)
    extra, extra_by_rank = dict(old.extra), dict(old.extra_by_rank)
    for key in leaving:
        rank = ranks.pop(key, None)
        if rank is None:
            continue  # was not visible: in no list
        if key in joined:  # its entry is in the overlay: take it out there (small lists, copied)
            joined.discard(key)
            extra_by_rank[rank] = [k for k in extra_by_rank[rank] if k != key]
            for word in words_of(old_items[key]):
                extra[word] = [k for k in extra[word] if k != key]
        else:
            dead.add(key)
    if len(dead) + len(joined) + len(visible) > _MAX_OVERLAY:
        return None
    low = min(position.values(), default=0)
    for key in visible:
        rank = trust_rank[items[key].trust]
        ranks[key] = rank
        low -= 1
        position[key] = low
        joined.add(key)
        extra_by_rank[rank] = [key, *extra_by_rank.get(rank, ())]
        for word in words_of(items[key]):
            extra[word] = [*extra.get(word, ()), key]
    newest_key = visible[-1] if visible else (old.newest if old.newest in ranks else None)
    if newest_key is None and ranks:
        newest_key = min(ranks, key=position.__getitem__)
    return RankIndex(
        old.postings,
        old.by_rank,
        ranks,
        position,
        len(items),
        newest_key,
        frozenset(dead),
        frozenset(joined),
        extra,
        extra_by_rank,
    )


def ranked_from_index(
    items: dict[str, HarnessEntry], index: RankIndex, query_words: frozenset[str], limit: int
) -> list[tuple[str, HarnessEntry]]:
    """The same choice as the plain pass: by (relevance, trust, recency), `limit` at most."""
    counts: Counter[str] = Counter()
    for word in query_words:
        counts.update(index.postings.get(word, ()))  # counted in C
    dead = index.dead
    if dead or index.extra:  # a derived index: stale base counts out, the overlay's in
        for key in dead:
            counts.pop(key, None)
        for word in query_words:
            counts.update(index.extra.get(word, ()))
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
    # Then the entries sharing no word, trust then recency (the overlay's are newer than the rest).
    for rank in sorted({*index.by_rank, *index.extra_by_rank}):
        for key in index.extra_by_rank.get(rank, ()):
            if len(chosen) >= limit:
                return chosen
            if key not in counts:
                chosen.append((key, items[key]))
        for key in index.by_rank.get(rank, ()):
            if len(chosen) >= limit:
                return chosen
            if key not in counts and key not in dead:
                chosen.append((key, items[key]))
    return chosen
