"""`Promotions`: moving a local entry to the global or project harness (part of `HarnessService`).

To global it applies at once (a user asked); to project the create waits as a pending review, and
approving it applies both halves (decisions.py deletes the local copy).
"""

from __future__ import annotations

from functools import partial

import anyio

from agent_core.refinement.policy import needs_review
from agent_core.refinement.records import PendingReview, Scope, new_job_id
from agent_core.refinement.service_core import ServiceCore
from agent_core.trust.promotion import TARGETS as PROMOTION_TARGETS
from agent_core.trust.promotion import (
    Promotion,
    PromotionError,
    create_proposal,
    find_local,
    removal_proposal,
)
from harness_store import Proposal


class Promotions(ServiceCore):
    """`promote`, and whether a promotion waits for review (see the module docstring)."""

    def reviews_promotion(self, scope: Scope, kinds: set[str]) -> bool:
        """True when a promotion to `scope` waits for review: a project one does, like every
        project edit (policy.py; only `refine_review = never` skips it). A global one a user asked
        for applies at once."""
        policy = self._policy()
        return scope == "project" and needs_review(
            scope=scope,
            mode=policy.mode,
            refine_review=policy.refine_review,
            kinds=kinds,
            trusted=self.trusted,
        )

    async def hold_promotion(
        self, proposal: Proposal, *, scope: Scope, entry: tuple[str, str]
    ) -> PendingReview:
        """Hold a promotion's create as a pending review; approving it applies the create, then
        deletes the local copy `entry` (kind, id) -- the two undoable refinements of a promotion."""
        pending = PendingReview(
            proposal_id=new_job_id("p"),
            proposal=proposal,
            scope=scope,
            trigger="user",
            baseline=await anyio.to_thread.run_sync(self.scopes.store(scope).load),
            source="user",
            interactive=True,
            promotion_of=entry,
        )
        await self._hold(pending)
        return pending

    def promotion_scopes(self) -> tuple[Scope, ...]:
        return tuple(scope for scope, _ in self.scopes.each())

    async def promote(self, entry_id: str, target: Scope, *, kind: str | None = None) -> Promotion:
        """Move a local entry to `target` (create there, then delete here), each half a reported
        refinement; `PromotionError` for an unknown or ambiguous entry or a target this session
        has no store for. To global it applies at once (a user asked); to project the create
        waits as a pending review (`proposal_id`), and approving it applies both halves."""
        if target not in PROMOTION_TARGETS or target not in self.promotion_scopes():
            raise PromotionError(
                f"there is no {target} harness for this session"
                + (" (a project harness needs a git repository)" if target == "project" else "")
            )
        entry = await anyio.to_thread.run_sync(partial(find_local, self.scopes.local, entry_id, kind))
        proposal = create_proposal(entry, target, self.session_id)
        if self.reviews_promotion(target, {entry.kind}):
            pending = await self.hold_promotion(proposal, scope=target, entry=(entry.kind, entry.id))
            return Promotion(entry, target, None, None, proposal_id=pending.proposal_id)
        created = await self.apply_user(proposal, scope=target)
        removed = None
        if created.applied:
            removed = await self.apply_user(removal_proposal(entry, target, created.id), scope="local")
        return Promotion(entry, target, created, removed)
