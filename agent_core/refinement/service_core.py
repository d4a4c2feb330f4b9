"""`ServiceCore`: the state of one session's harness decisions and the one way a change is written.

The stores (`scopes`), the jobs' counters and ordered outbox, the pending reviews, the kinds trusted
this session and the skill check; `apply` (one store write with the session's checks), `report` (its
card), `submit` (apply now or hold for review, per the policy; empty lessons refused first),
`apply_user` (a person's write, no review), `resolve_conflict` (a project conflict's side) and
`quiescence()`. Decisions, rollback and promotion build on it (decisions.py, rollbacks.py,
promotions.py); `HarnessService` (service.py) is all of them in one object.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Self

import anyio

from agent_core.refinement.jobs import Jobs
from agent_core.refinement.outbox import CoordinatorEvent, Outbox
from agent_core.refinement.pending_reviews import PendingReviews
from agent_core.refinement.policy import Policy, TrustKey, needs_review
from agent_core.refinement.quiescence import Quiescence, no_children
from agent_core.refinement.records import (
    Found,
    OutcomeStatus,
    PendingReview,
    RefinementOutcome,
    ReviewRequested,
    Scope,
    Trigger,
    new_job_id,
)
from agent_core.refinement.reporting import report_result, report_unproven
from agent_core.refinement.trajectory import TrajectoryItem, message_ids
from harness_store import HarnessState, HarnessStore, Proposal, RefinementResult, Scopes
from harness_store.validation import empty_lesson
from harness_store.verify import PreApplyVerifier

if TYPE_CHECKING:
    from agent_core.refinement.replay import ReplayReport

log = logging.getLogger(__name__)


class ServiceCore:
    """The decisions' state over one session's `scopes`, and applying (see the module docstring)."""

    def __init__(
        self,
        scopes: Scopes,
        *,
        session_id: str | None,
        trajectory: Callable[[], Sequence[TrajectoryItem]] = tuple,
        policy: Callable[[], Policy] = Policy,
        jobs: Jobs | None = None,
        pending: PendingReviews | None = None,
        children: Callable[[], int] = no_children,
        evidence: Callable[[], set[str] | None] | None = None,
    ) -> None:
        self.scopes = scopes
        self.session_id = session_id
        self._trajectory = trajectory
        self._policy = policy
        self.jobs = jobs if jobs is not None else Jobs(Outbox())
        self.pending = pending if pending is not None else PendingReviews(scopes, session_id or "")
        self.children = children
        # The message ids cited evidence must exist among (None: not checked); by default the
        # ids of this session's transcript.
        self._evidence = evidence
        self.trusted: set[TrustKey] = set()
        # scope -> that store's pre-apply skill verifier (None: skills are not checked).
        self.skill_verifier: Callable[[str], PreApplyVerifier] | None = None

    @classmethod
    def for_stores(
        cls,
        local: HarnessStore,
        global_: HarnessStore,
        *,
        session_id: str | None,
        evidence: Callable[[], set[str] | None] | None = None,
        skill_verifier: Callable[[str], PreApplyVerifier] | None = None,
    ) -> Self:
        """A service over two stores with no session behind it (a review panel beside no running
        server): nothing is reviewed by policy (the caller is the reviewer), its cards go nowhere.
        Build and use it inside one event loop (its outbox belongs to that loop)."""
        service = cls(Scopes(local, global_), session_id=session_id, evidence=evidence)
        service.skill_verifier = skill_verifier
        return service

    @property
    def outbox(self) -> Outbox:
        return self.jobs.outbox

    def replays(self) -> bool:
        """Whether a proposal that claims to fix a failed step is replayed first (`refine_verify`)."""
        return self._policy().refine_verify == "replay"

    def emit(self, event: CoordinatorEvent) -> None:
        """Send an event to the listeners, in order with every report."""
        self.outbox.emit(event)

    def quiescence(self) -> Quiescence:
        """Settled = refinement idle (as published) and no child still queued or running."""
        return Quiescence(
            self.outbox.quiescent,
            self.jobs.pending,
            self.jobs.in_flight,
            self.children(),
            self.jobs.last_refinement_id,
        )

    async def items(self) -> list[TrajectoryItem]:
        # Reading the transcript is file I/O: off the event loop.
        return await anyio.to_thread.run_sync(lambda: list(self._trajectory()))

    async def known_ids(self) -> set[str] | None:
        """The message ids a reviewed proposal's evidence is checked against."""
        if self._evidence is not None:
            return await anyio.to_thread.run_sync(self._evidence)
        return message_ids(await self.items())

    def locate(self, refinement_id: str) -> Found | None:
        """The scope whose history holds `refinement_id`, and the record (blocking)."""
        found = self.scopes.locate(refinement_id)
        return Found(*found) if found is not None else None

    def view_path(self, scope: str, kind: str, entry_id: str) -> str | None:
        """The view file an edit of this entry is shown under (the diff path of review cards)."""
        try:
            return str(self.scopes.store(scope).view_path(kind, entry_id, scope=scope))  # type: ignore[arg-type]
        except Exception:
            log.exception("no view path for %s %s/%s", scope, kind, entry_id)
            return None

    # ------------------------------------------------------------ applying

    async def apply(
        self,
        proposal: Proposal,
        *,
        scope: Scope,
        trigger: Trigger,
        baseline: HarnessState | None,
        known: set[str] | None,
        source: str,
        verify: bool = True,
    ) -> RefinementResult:
        """One store write with this session's checks: evidence against `known` message ids, the
        skill check, and (local) the global ids a local edit may not touch."""
        store = self.scopes.store(scope)
        kwargs: dict[str, Any] = {
            "scope": scope,
            "trigger": trigger,
            "session_id": self.session_id,
            "source": source,
        }
        if baseline is not None:
            kwargs["baseline"] = baseline
        if known is not None:
            kwargs["evidence_checker"] = known.__contains__
        if self.skill_verifier is not None and verify:
            kwargs["verifier"] = self.skill_verifier(scope)
        if scope == "local":
            # Lets the store refuse a local update of a global id by name ("read-only"), not "not found".
            kwargs["global_state"] = await anyio.to_thread.run_sync(self.scopes.global_.load)
        return await anyio.to_thread.run_sync(partial(store.apply, proposal, **kwargs))

    def report(
        self, result: RefinementResult, trigger: Trigger, *, replay: ReplayReport | None = None
    ) -> RefinementOutcome:
        """Report a written refinement (its card, with the replays that decided it) and say how it
        ended."""
        self.jobs.last_refinement_id = result.id
        self.emit(report_result(result, view_path=self.view_path, replay=replay))
        status: OutcomeStatus = "applied" if result.applied else "refused"
        errors = "; ".join(result.errors) or None
        return RefinementOutcome(
            result.id,
            trigger,
            result.scope,
            status,
            refinement_id=result.id,
            summary=result.summary,
            error=errors,
            errors=tuple(result.errors),
            refinement_ids=(result.id,),
            replay=replay,
        )

    async def submit(
        self,
        proposal: Proposal,
        *,
        scope: Scope,
        trigger: Trigger,
        baseline: HarnessState | None,
        items: Sequence[TrajectoryItem] | None = None,
        mode_override: str | None = None,
        source: str = "refine",
        interactive: bool = False,
        replay: ReplayReport | None = None,
    ) -> RefinementOutcome:
        """Apply now or hold for review, per the policy. Also the path of direct kernel writes.

        `source` is who wrote the content: `refine` (the planner, even when the user asked for the
        refinement) or `agent` (a cell). Neither bypasses tombstones; only user-written content does.
        `replay`: the proposal's replays (`refine_verify = "replay"`). Unless they show the edit
        helps, it never applies unseen: held for review when the policy reviews it anyway (the
        card shows the replays), refused with the reason when the policy would apply it at once.
        """
        refused, rest = await self._refuse_empty_lessons(
            proposal, scope=scope, trigger=trigger, source=source
        )
        if refused is not None and not rest.edits:
            return refused
        outcome = await self._submit(
            rest,
            scope=scope,
            trigger=trigger,
            baseline=baseline,
            items=items,
            mode_override=mode_override,
            source=source,
            interactive=interactive,
            replay=replay,
        )
        if refused is None:
            return outcome
        # The caller (a cell, the planner's job) hears about the refused edits too.
        return replace(
            outcome,
            error="; ".join(e for e in (outcome.error, refused.error) if e) or None,
            errors=(*outcome.errors, *refused.errors),
        )

    async def _submit(
        self,
        proposal: Proposal,
        *,
        scope: Scope,
        trigger: Trigger,
        baseline: HarnessState | None,
        items: Sequence[TrajectoryItem] | None,
        mode_override: str | None,
        source: str,
        interactive: bool,
        replay: ReplayReport | None = None,
    ) -> RefinementOutcome:
        policy = self._policy()
        kinds = {edit.kind for edit in proposal.edits}
        mode = mode_override or policy.mode
        review = needs_review(
            scope=scope, mode=mode, refine_review=policy.refine_review, kinds=kinds, trusted=self.trusted
        )
        if replay is not None and not replay.helps and not review:
            # Nobody would see it before it applies, and the replay did not prove it: refused.
            refused_id = new_job_id("p")
            event = report_unproven(refused_id, proposal, scope, replay)
            self.emit(event)
            return RefinementOutcome(
                refused_id,
                trigger,
                scope,
                "rejected",
                proposal_id=refused_id,
                summary=proposal.summary,
                error=event.error,
                replay=replay,
            )
        if review:
            pending = PendingReview(
                proposal_id=new_job_id("p"),
                proposal=proposal,
                scope=scope,
                trigger=trigger,
                baseline=baseline if baseline is not None else self.scopes.store(scope).load(),
                source=source,
                interactive=interactive,
                replay=replay,
            )
            await self._hold(pending)
            return RefinementOutcome(
                pending.proposal_id,
                trigger,
                scope,
                "pending_review",
                proposal_id=pending.proposal_id,
                summary=proposal.summary,
                replay=replay,
            )
        known = message_ids(items if items is not None else await self.items())
        result = await self.apply(
            proposal, scope=scope, trigger=trigger, baseline=baseline, known=known, source=source
        )
        return self.report(result, trigger, replay=replay)

    async def _refuse_empty_lessons(
        self, proposal: Proposal, *, scope: Scope, trigger: Trigger, source: str
    ) -> tuple[RefinementOutcome | None, Proposal]:
        """Edits whose content says nothing ("...", the title again) are refused now, whatever the
        review policy: the store refuses them itself, with the reason, in a recorded refinement
        whose card lists them, so a person is never asked to review an empty lesson. Returns that
        outcome (None when there was none) and the proposal without them."""
        empty = [
            edit.action in ("create", "update") and empty_lesson(edit.title, edit.content) is not None
            for edit in proposal.edits
        ]
        if not any(empty):
            return None, proposal
        broken = [edit for edit, bad in zip(proposal.edits, empty, strict=True) if bad]
        kept = [edit for edit, bad in zip(proposal.edits, empty, strict=True) if not bad]
        result = await self.apply(
            proposal.model_copy(update={"edits": broken}),
            scope=scope,
            trigger=trigger,
            baseline=None,
            known=None,
            source=source,
            verify=False,  # refused whatever a skill check would say: no scratch kernel
        )
        return self.report(result, trigger), proposal.model_copy(update={"edits": kept})

    async def _hold(self, pending: PendingReview) -> None:
        await anyio.to_thread.run_sync(self.pending.hold, pending)
        self.emit(ReviewRequested(pending))

    async def apply_user(self, proposal: Proposal, *, scope: Scope) -> RefinementResult:
        """Apply a proposal a user asked for by command (`/promote`, a panel's delete) now, no
        review, and report it. Validation, tombstones and the skill check still apply."""
        async with self.jobs.busy():
            result = await self.apply(
                proposal, scope=scope, trigger="user", baseline=None, known=None, source="user"
            )
            self.report(result, "user")
            return result

    async def resolve_conflict(self, kind: str, entry_id: str, choice: int) -> RefinementResult:
        """End a project conflict with side `choice` (a reported refinement, trigger `user`).

        `KeyError` when the entry is not in conflict, `IndexError` for a side that does not exist."""
        project = self.scopes.project
        if project is None:
            raise KeyError("this session has no project harness")
        result: RefinementResult = await anyio.to_thread.run_sync(
            partial(project.resolve_conflict, kind, entry_id, choice, session_id=self.session_id)
        )
        self.report(result, "user")
        return result
