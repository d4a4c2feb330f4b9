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

from harness_store.models import HarnessEntry

_BOUND = 8  # dicts kept (a few sessions' prompt views, four kinds each)


@dataclass(frozen=True)
class RankIndex:
    postings: dict[str, list[str]]  # word -> keys of visible entries holding it
    by_rank: dict[int, list[str]]  # trust rank -> visible keys, newest first
    ranks: dict[str, int]  # key -> trust rank (visible entries only)
    position: dict[str, int]  # key -> place in newest-first order (recency as one int lookup)
    size: int  # len(items) when built: a dict grown or shrunk since is indexed again


_seen: dict[int, dict[str, HarnessEntry]] = {}
_indexes: dict[int, tuple[dict[str, HarnessEntry], RankIndex]] = {}


def _remember(cache: dict[int, object], key: int, value: object) -> None:
    if len(cache) >= _BOUND:
        cache.pop(next(iter(cache)))
    cache[key] = value


def index_for(
    items: dict[str, HarnessEntry],
    trust_rank: dict[str, int],
    words_of: Callable[[HarnessEntry], frozenset[str]],
) -> RankIndex | None:
    """The index of `items`, or None the first time this dict is seen (rank it with a plain pass)."""
    ident = id(items)
    hit = _indexes.get(ident)
    if hit is not None and hit[0] is items and hit[1].size == len(items):
        return hit[1]
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
    index = RankIndex(postings, by_rank, ranks, position, len(items))
    _remember(_indexes, ident, (items, index))  # type: ignore[arg-type]
    return index


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
