"""What both stores (`HarnessStore`, `ProjectStore`) share for follow-up writes: rollbacks and reviews.

The checks of a caller's trigger and review decision, the options a follow-up is applied with (it
writes to its target's scope and session), the review's apply step (trust changes plus its
tombstones) and the question "is this refinement undone now?" over a history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness_store.core import ApplyOptions, ReviewPlan, apply_proposal
from harness_store.ids import new_refinement_id, utc_now
from harness_store.models import TRIGGERS, HarnessEntry, HarnessState, RefinementResult
from harness_store.tombstones import add_tombstone

REVIEW_DECISIONS = ("apply", "reject", "reject_forever")


def check_trigger(trigger: str) -> None:
    """Raise ValueError for a trigger that is not one of `TRIGGERS`."""
    if trigger not in TRIGGERS:
        raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, not {trigger!r}")


def check_decision(decision: str) -> None:
    """Raise ValueError for a review decision other than apply / reject / reject_forever."""
    if decision not in REVIEW_DECISIONS:
        raise ValueError(f"decision must be one of {', '.join(REVIEW_DECISIONS)}, not {decision!r}")


def follow_up_options(
    target: RefinementResult,
    trigger: str,
    *,
    restores: Sequence[HarnessEntry | None],
    rollback_of: str | None = None,
    review_of: str | None = None,
    preset_errors: Sequence[str | None] = (),
    scope: str | None = None,
) -> ApplyOptions:
    """Options of a rollback or review of `target`: a new id, now, the target's scope (unless
    `scope` says otherwise) and session."""
    return ApplyOptions(
        refinement_id=new_refinement_id(),
        now=utc_now(),
        scope=scope or target.scope,
        trigger=trigger,
        session_id=target.session_id,
        rollback_of=rollback_of,
        review_of=review_of,
        restores=restores,
        preset_errors=preset_errors,
    )


def apply_review(
    state: HarnessState, plan: ReviewPlan, opts: ApplyOptions
) -> tuple[HarnessState, RefinementResult]:
    """Apply a review plan: its trust changes as one refinement, and its tombstones added."""
    new_state, result = apply_proposal(state, plan.proposal, opts)
    tombstones = new_state.tombstones
    for stone in plan.tombstones:
        tombstones = add_tombstone(tombstones, stone)
    return HarnessState.build(new_state.entries, tombstones, head=new_state.head), result


def rolled_back_by(records: Iterable[RefinementResult], refinement_id: str) -> str | None:
    """The id of the applied rollback that currently undoes `refinement_id` in `records`, or None
    (never rolled back, or its rollback was itself rolled back since)."""
    undone: dict[str, str] = {}
    for record in records:
        if record.rollback_of is not None and record.applied:
            undone[record.rollback_of] = record.id
    later = undone.get(refinement_id)
    if later is not None and later in undone:
        return None  # the rollback was rolled back: the refinement is in effect again
    return later
