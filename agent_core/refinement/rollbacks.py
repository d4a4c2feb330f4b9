"""`Rollbacks`: the rollback rule of a session's harness (part of `HarnessService`).

Already rolled back is answered without a write (no history record for a no-op); otherwise the
refinement is rolled back in whichever store holds it, and a promotion's other half with it (a
promotion is two records: create in the target, delete locally; undoing either undoes both).
"""

from __future__ import annotations

from functools import partial

import anyio

from agent_core.refinement.records import Found, RollbackOutcome, UnknownRefinement
from agent_core.refinement.service_core import ServiceCore
from agent_core.trust.promotion import local_removal_of, promoted_as
from harness_store import RefinementResult, Store


class Rollbacks(ServiceCore):
    """`rollback`: the one rollback of any scope (see the module docstring)."""

    async def _rollback_one(self, refinement_id: str, *, force: bool = False) -> RefinementResult:
        """Roll back one refinement of any scope (no model call) and report it.

        `UnknownRefinement` when no store has the id. A refused rollback is returned (and
        reported), not raised: its `errors` name the edits that conflict.
        """
        async with self.jobs.busy():
            found = await anyio.to_thread.run_sync(self.locate, refinement_id)
            if found is None:
                raise UnknownRefinement(refinement_id)
            store = self.scopes.store(found.scope)
            result: RefinementResult = await anyio.to_thread.run_sync(
                partial(store.rollback, refinement_id, force=force)
            )
            self.report(result, "user")
            return result

    async def rollback(self, refinement_id: str, *, force: bool = False) -> RollbackOutcome:
        """The rollback rule: already rolled back is answered without a write (no history record
        for a no-op); otherwise roll it back, and a promotion's other half with it.
        `UnknownRefinement` when no store has the id; a refused rollback is a result."""
        found = await anyio.to_thread.run_sync(self.locate, refinement_id)
        if found is None:
            raise UnknownRefinement(refinement_id)
        store = self.scopes.store(found.scope)
        later = await anyio.to_thread.run_sync(store.rolled_back_by, refinement_id)
        if later is not None:
            return RollbackOutcome(refinement_id, rolled_back_by=later)
        result = await self._rollback_one(refinement_id, force=force)
        partner = await self._rollback_promotion_partner(found) if result.applied else None
        return RollbackOutcome(refinement_id, result=result, partner_id=partner)

    async def _rollback_promotion_partner(self, found: Found) -> str | None:
        # A promotion is two records (create in the target, delete locally); undoing either half
        # undoes both, so the entry is local again and only local.
        partner: str | None = None
        if found.scope == "local":
            target = promoted_as(found.result)
            partner = target[1] if target is not None else None
        else:
            partner = await anyio.to_thread.run_sync(local_removal_of, self.scopes.local, found.result.id)
        if partner is None:
            return None
        other = await anyio.to_thread.run_sync(self.locate, partner)
        if other is None:
            return None
        store: Store = self.scopes.store(other.scope)
        if await anyio.to_thread.run_sync(store.rolled_back_by, partner) is not None:
            return None
        return (await self._rollback_one(partner)).id
