"""Tombstones: content that review rejected (or a rollback undid) must not silently come back.

Matching is on normalized content (case- and whitespace-insensitive) and, for near-duplicates, on
the Jaccard similarity of character shingles (>= 0.9), so a re-proposal that only re-words a few
characters is still caught while genuinely new content is not.
"""

from __future__ import annotations

import re
from functools import lru_cache

from harness_store.ids import new_tombstone_id, utc_now
from harness_store.models import Proposal, Tombstone
from harness_store.validation import resolve_id

SIMILARITY_THRESHOLD = 0.9
_SHINGLE = 5
_WS = re.compile(r"\s+")


def normalize_content(text: str) -> str:
    """Lowercase with every run of whitespace collapsed to one space, trimmed."""
    return _WS.sub(" ", text.lower()).strip()


@lru_cache(maxsize=4096)
def shingles(normalized: str) -> frozenset[str]:
    """Character 5-grams of the normalized text (the whole text when shorter)."""
    if len(normalized) <= _SHINGLE:
        return frozenset({normalized})
    return frozenset(normalized[i : i + _SHINGLE] for i in range(len(normalized) - _SHINGLE + 1))


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of the shingle sets of two normalized texts."""
    if a == b:
        return 1.0
    sa, sb = shingles(a), shingles(b)
    # Jaccard can only reach the threshold when the set sizes are close; skip the set algebra otherwise.
    small, large = sorted((len(sa), len(sb)))
    if large == 0 or small / large < SIMILARITY_THRESHOLD:
        return 0.0
    return len(sa & sb) / len(sa | sb)


def matching_tombstone(
    tombstones: list[Tombstone], kind: str, entry_id: str | None, content: str | None
) -> Tombstone | None:
    """The first tombstone of `kind` that this content (or, for a forever tombstone, this id) hits."""
    normalized = normalize_content(content) if content else None
    for stone in tombstones:
        if stone.kind != kind:
            continue
        if stone.forever and entry_id is not None and stone.entry_id == entry_id:
            return stone
        if normalized is not None and similarity(stone.normalized, normalized) >= SIMILARITY_THRESHOLD:
            return stone
    return None


def make_tombstone(
    kind: str,
    content: str,
    *,
    entry_id: str | None,
    reason: str,
    refinement_id: str | None,
    forever: bool = False,
) -> Tombstone:
    """A new tombstone for `content` of `kind` (normalized for matching)."""
    return Tombstone(
        id=new_tombstone_id(),
        kind=kind,
        normalized=normalize_content(content),
        content=content,
        entry_id=entry_id,
        forever=forever,
        reason=reason,
        refinement_id=refinement_id,
        created_at=utc_now(),
    )


def add_tombstone(tombstones: list[Tombstone], stone: Tombstone) -> list[Tombstone]:
    """A new list with `stone` added unless an equal tombstone (same kind and content) exists."""
    for existing in tombstones:
        if existing.kind == stone.kind and existing.normalized == stone.normalized:
            if stone.forever and not existing.forever:
                upgraded = existing.model_copy(update={"forever": True, "entry_id": stone.entry_id})
                return [upgraded if t is existing else t for t in tombstones]
            return tombstones
    return [*tombstones, stone]


def reject_tombstones(
    tombstones: list[Tombstone], proposal: Proposal, *, forever: bool, reason: str
) -> tuple[list[Tombstone], list[Tombstone], list[Tombstone]]:
    """Tombstone the content of a proposal rejected before it was ever applied (every create or
    update with content). Returns the new list, the tombstones added, and the changes to record:
    those added plus existing ones upgraded to `forever` (the upgraded copy)."""
    out = list(tombstones)
    added: list[Tombstone] = []
    changed: list[Tombstone] = []
    for edit in proposal.edits:
        if edit.action not in ("create", "update") or not edit.content:
            continue
        stone = make_tombstone(
            edit.kind,
            edit.content,
            entry_id=resolve_id(edit),
            reason=reason,
            refinement_id=None,
            forever=forever,
        )
        grown = add_tombstone(out, stone)
        if len(grown) > len(out):
            added.append(stone)
            changed.append(stone)
        elif grown is not out:
            changed.extend(t for t in grown if t not in out)
        out = grown
    return out, added, changed


def lift_tombstone(
    tombstones: list[Tombstone], tombstone_id: str
) -> tuple[list[Tombstone], Tombstone | None]:
    """`tombstones` without the one with this id, and that one (None, and the list unchanged, if unknown)."""
    lifted = next((t for t in tombstones if t.id == tombstone_id), None)
    if lifted is None:
        return tombstones, None
    return [t for t in tombstones if t.id != tombstone_id], lifted
