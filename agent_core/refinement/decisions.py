"""`Decisions`: deciding a pending review (part of `HarnessService`).

Claim the proposal (removing its file is the claim), reject it (to a tombstone when "forever"), or
apply it with evidence and the skill check, candidate to verified, then a promotion's second half
(the local copy deleted); review an applied refinement of candidates by its id; hold a cell's
change to `.continual-acp/` and decide it (its files written back or left as they were).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from agent_core.refinement.records import (
    PendingReview,
    RefinementOutcome,
    ReviewChoice,
    ReviewDecided,
    new_job_id,
)
from agent_core.refinement.reporting import report_rejection
from agent_core.refinement.service_core import ServiceCore
from agent_core.trust.promotion import removal_proposal_for
from harness_store import HarnessState, Proposal, RefinementResult
from harness_store.errors import ReviewNotFound
from harness_store.validation import resolve_id

if TYPE_CHECKING:
    from agent_core.control_plane.held import HeldChange

log = logging.getLogger(__name__)


def _select(
    proposal: Proposal, edit_ids: Sequence[str] | None, edited: Mapping[str, str] | None = None
) -> Proposal:
    """Only the edits whose (resolved) ids were chosen (all when `edit_ids` is None), with the
    content a reviewer rewrote (`edited`: entry id -> text) in place of the planned one."""
    edits = list(proposal.edits)
    if edit_ids is not None:
        wanted = set(edit_ids)
        edits = [edit for edit in edits if resolve_id(edit) in wanted]
    if edited:
        edits = [
            edit.model_copy(update={"content": edited[key]})
            if (key := resolve_id(edit)) is not None and key in edited
            else edit
            for edit in edits
        ]
    return proposal.model_copy(update={"edits": edits})


class Decisions(ServiceCore):
    """`decide` and `hold_change` (see the module docstring)."""

    async def decide(
        self,
        proposal_id: str,
        choice: ReviewChoice,
        *,
        edit_ids: Sequence[str] | None = None,
        edited: Mapping[str, str] | None = None,
        reason: str | None = None,
        announce: bool = True,
    ) -> RefinementOutcome:
        """Decide a pending review (or review an applied refinement of candidates by its id);
        `announce` also sends `ReviewDecided` after the cards.

        `ReviewNotFound` naming the id when there is nothing to decide under it,
        `ReviewAlreadyDecided` when another session claimed the proposal first.
        """
        async with self.jobs.busy():
            self.pending.refresh()
            pending = self.pending.claim(proposal_id)
            if pending is None:
                outcome = await self._review_applied(proposal_id, choice, edit_ids)
            else:
                outcome = await self._decide_pending(pending, choice, edit_ids, edited, reason)
        if announce:
            self.emit(ReviewDecided(proposal_id, outcome))
        return outcome

    async def _decide_pending(
        self,
        pending: PendingReview,
        choice: ReviewChoice,
        edit_ids: Sequence[str] | None,
        edited: Mapping[str, str] | None = None,
        reason: str | None = None,
    ) -> RefinementOutcome:
        if reason:
            log.info("review of proposal %s: %s (%s)", pending.proposal_id, choice, reason)
        if pending.held is not None:
            return await self._decide_held(pending, choice)
        proposal = _select(pending.proposal, edit_ids, edited)
        store = self.scopes.store(pending.scope)
        if choice in ("reject", "reject_forever"):
            forever = choice == "reject_forever"
            stones: list[Any] = []
            # A promotion rejected once is "not now" for the user's own entry: nothing goes into
            # the target (a repository's committed tombstones); "forever" still tombstones it.
            if forever or pending.promotion_of is None:
                stones = await anyio.to_thread.run_sync(
                    partial(
                        store.reject_proposal,
                        proposal,
                        forever=forever,
                        reason=f"{choice} in review of proposal {pending.proposal_id}"
                        + (f": {reason}" if reason else ""),
                    )
                )
            message = "rejected in review" + (" forever (tombstoned)" if forever else "")
            self.emit(report_rejection(pending, proposal, message, [s.id for s in stones]))
            return RefinementOutcome(
                pending.proposal_id,
                pending.trigger,
                pending.scope,
                "rejected",
                proposal_id=pending.proposal_id,
                summary=proposal.summary,
                error=message,
                tombstones=tuple(s.id for s in stones),
            )
        if choice == "apply_always":
            self.trusted.update((pending.scope, kind) for kind in pending.kinds)
        result = await self.apply(
            proposal,
            scope=pending.scope,
            trigger=pending.trigger,
            baseline=pending.baseline,
            # A promotion's evidence was checked when its entry was written (maybe in another
            # session's transcript); the user's command is the reason now.
            known=None if pending.promotion_of is not None else await self.known_ids(),
            source=pending.source,
        )
        if result.applied and pending.trigger != "user":
            # Approved by a human: promote what was written from candidate to verified.
            await anyio.to_thread.run_sync(partial(store.record_review, result.id, "apply"))
        outcome = self.report(result, pending.trigger, replay=pending.replay)
        if result.applied and pending.promotion_of is not None:
            removed = await self._remove_promoted(pending, result.id)
            if removed is not None:
                outcome = replace(outcome, refinement_ids=(result.id, removed.id))
        return outcome

    async def hold_change(self, held: HeldChange) -> PendingReview:
        """A cell changed `.continual-acp/` (already restored): hold it as a pending review of the
        session (its pending dir: `/review`, `_harness/review` and the panel list it). Never asked
        at once: the turn goes on and the card waits."""
        pending = PendingReview(
            proposal_id=new_job_id("p"),
            proposal=Proposal(
                summary=held.summary(),
                rationale=f"cell {held.cell_id or '(none)'} wrote the control plane {held.when}",
            ),
            scope="local",
            trigger="model",
            baseline=HarnessState(),
            source="agent",
            held=held,
        )
        await self._hold(pending)
        return pending

    async def _decide_held(self, pending: PendingReview, choice: ReviewChoice) -> RefinementOutcome:
        """A held control-plane change: approving writes the held files back, rejecting leaves the
        files as they were before the cell (no refinement either way)."""
        held = pending.held
        assert held is not None
        if choice in ("reject", "reject_forever"):
            return RefinementOutcome(
                pending.proposal_id,
                pending.trigger,
                pending.scope,
                "rejected",
                proposal_id=pending.proposal_id,
                summary=pending.proposal.summary,
                error="rejected in review: the files stay as they were before the cell",
            )
        problems = await anyio.to_thread.run_sync(held.write_back)
        return RefinementOutcome(
            pending.proposal_id,
            pending.trigger,
            pending.scope,
            "refused" if problems else "applied",
            proposal_id=pending.proposal_id,
            summary=pending.proposal.summary,
            error="; ".join(problems) or None,
            errors=tuple(problems),
        )

    async def _review_applied(
        self, refinement_id: str, choice: ReviewChoice, edit_ids: Sequence[str] | None
    ) -> RefinementOutcome:
        found = await anyio.to_thread.run_sync(self.locate, refinement_id)
        if found is not None:
            decision = "apply" if choice == "apply_always" else choice
            if choice == "apply_always":
                self.trusted.update(
                    (found.result.scope, e.kind) for e in found.result.applied_edits if e.applied
                )
            store = self.scopes.store(found.scope)
            result = await anyio.to_thread.run_sync(
                partial(store.record_review, refinement_id, decision, edit_ids=edit_ids)
            )
            return self.report(result, "user")
        known = ", ".join(self.pending) or "none"
        raise ReviewNotFound(
            refinement_id, f"no pending review or refinement {refinement_id!r} (pending reviews: {known})"
        )

    async def _remove_promoted(self, pending: PendingReview, created_id: str) -> RefinementResult | None:
        """A promotion's second half: delete the local copy the approved create moved up."""
        assert pending.promotion_of is not None
        if self.scopes.local is self.scopes.global_:
            return None  # a service with no session's store (the global one stands in): no local copy
        kind, entry_id = pending.promotion_of
        removal = removal_proposal_for(kind, entry_id, pending.scope, created_id)
        result = await self.apply(
            removal, scope="local", trigger="user", baseline=None, known=None, source="user"
        )
        self.report(result, "user")
        return result
