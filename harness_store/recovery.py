"""Rebuilding a damaged state file from the history, and keeping the damaged file aside.

The history (`refinements.jsonl`) is the source of truth: every applied edit carries its `after`
snapshot (trust included), rollbacks of creates and review rejections are recorded with enough to
re-derive their tombstones, and tombstones added or lifted outside an edit are records of their
own (`RefinementResult.tombstoned` / `.lifted`). A state file that cannot be trusted (truncated,
empty, not an object, wrong shape, a directory in its place) is therefore never served as "an empty
harness" while the history has records: the entries are replayed, the tombstone additions and lifts
replayed over those the damaged file still had, and the damaged file is renamed to
`harness_state.json.damaged-<stamp>` so a person can look at it.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from harness_store.core import replay
from harness_store.models import HarnessState, RefinementResult, Tombstone, empty_entries
from harness_store.tombstones import add_tombstone, make_tombstone

log = logging.getLogger("harness_store")

DAMAGED_MARK = ".damaged-"


def record_tombstones(record: RefinementResult) -> list[Tombstone]:
    """The tombstones one record added: by rolling back a create, by a review rejection, or
    directly (`tombstoned`: a proposal rejected before it was ever applied).

    Mirrors what `apply_proposal` (rollback deletes), `plan_review` (reject / reject_forever) and
    `reject_proposal` add, so a rebuilt state refuses the same content again.
    """
    stones: list[Tombstone] = []
    for edit in record.applied_edits:
        if not edit.applied:
            continue
        if record.rollback_of is not None and edit.action == "delete" and edit.before is not None:
            stone = make_tombstone(
                edit.before.kind,
                edit.before.content,
                entry_id=edit.before.id,
                reason=f"rolled back by {record.id}",
                refinement_id=record.rollback_of,
            )
            stones = add_tombstone(stones, stone)
        elif record.review_of is not None and edit.after is not None and edit.after.trust == "rejected":
            forever = "reject_forever" in (edit.reason or "")
            decision = "reject_forever" if forever else "reject"
            stone = make_tombstone(
                edit.after.kind,
                edit.after.content,
                entry_id=edit.after.id,
                reason=f"{decision} in review of {record.review_of}",
                refinement_id=record.review_of,
                forever=forever,
            )
            stones = add_tombstone(stones, stone)
    for stone in record.tombstoned:
        stones = add_tombstone(stones, stone)
    return stones


def _lift(tombstones: list[Tombstone], lifted: Tombstone) -> list[Tombstone]:
    """`tombstones` without `lifted`: the same id, or (for one re-derived from the history under
    a new id) the same kind and normalized content."""
    return [
        t
        for t in tombstones
        if t.id != lifted.id and (t.kind, t.normalized) != (lifted.kind, lifted.normalized)
    ]


def replay_tombstones(tombstones: list[Tombstone], records: Iterable[RefinementResult]) -> list[Tombstone]:
    """`tombstones` with each record's additions and lifts applied in history order (a lift
    undoes what came before it, a later rejection of the same content tombstones it again)."""
    out = list(tombstones)
    for record in records:
        for stone in record_tombstones(record):
            out = add_tombstone(out, stone)
        for stone in record.lifted:
            out = _lift(out, stone)
    return out


def rebuild_state(salvaged: HarnessState, records: list[RefinementResult]) -> HarnessState:
    """The state the history implies, keeping what the damaged file still had that history lacks.

    With no history at all the salvaged entries are all there is; otherwise the entries are the
    replay of every record. Tombstones are the salvaged ones with the history's additions and
    lifts replayed over them (so a lift in the history also removes a salvaged copy).
    """
    if not records:
        return salvaged
    entries = replay(empty_entries(), records)
    tombstones = replay_tombstones(list(salvaged.tombstones), records)
    return HarnessState.build(entries, tombstones, head=records[-1].id)


def set_aside(path: Path) -> Path | None:
    """Rename the damaged file (or directory) at `path` to `<name>.damaged-<stamp>`; None if gone.

    Raises OSError when it exists but cannot be renamed.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}{DAMAGED_MARK}{stamp}-{secrets.token_hex(3)}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return None
    return aside
