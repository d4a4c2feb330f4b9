"""`HarnessService`: the harness decisions of one session, constructible without a `Session`.

Every way a person or the agent changes the harness ends here, whichever door it came through
(`/review`, `/rollback`, `/promote`, `_harness/*`, a kernel call, a review panel): apply now or hold
for review (the policy), decide a pending review (claim, reject to tombstone, apply with evidence
and the skill check, candidate to verified, the promotion's second half), roll back (a no-op when
already undone, and a promotion's partner with it), promote, resolve a project conflict. Each
change is reported on the ordered outbox and counted as work in flight while it runs.

`quiescence()` is the one settled rule: refinement idle (nothing queued, held or running, as
published) and no child of the session still queued or running, as the subagent hub reports it
through the `children` callable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from agent_core.refinement.jobs import Jobs
from agent_core.refinement.outbox import CoordinatorEvent, Outbox
from agent_core.refinement.pending_reviews import PendingReviews
from agent_core.refinement.policy import TrustKey, needs_review
from agent_core.refinement.records import (
    Found,
    OutcomeStatus,
    PendingReview,
    QuiescenceChanged,
    RefinementOutcome,
    ReviewChoice,
    ReviewDecided,
    ReviewRequested,
    RollbackOutcome,
    Scope,
    Trigger,
    UnknownRefinement,
    new_job_id,
)
from agent_core.refinement.reporting import report_rejection, report_result, report_unproven
from agent_core.refinement.trajectory import TrajectoryItem, message_ids
from agent_core.trust.promotion import TARGETS as PROMOTION_TARGETS
from agent_core.trust.promotion import (
    Promotion,
    PromotionError,
    create_proposal,
    find_local,
    local_removal_of,
    promoted_as,
    removal_proposal,
    removal_proposal_for,
)
from harness_store import HarnessState, HarnessStore, Proposal, RefinementResult, Scopes, Store
from harness_store.errors import ReviewNotFound
from harness_store.validation import empty_lesson, resolve_id
from harness_store.verify import PreApplyVerifier

if TYPE_CHECKING:
    from agent_core.control_plane.held import HeldChange
    from agent_core.refinement.replay import ReplayReport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Policy:
    """The session settings decisions read at decision time (they can change mid-session)."""

    mode: str = "auto"
    refine_review: str = "global_only"
    # "replay": a proposal that claims to fix a failed step applies only when replaying the step
    # shows it helps (replay.py); "off": no replay.
    refine_verify: str = "off"


@dataclass(frozen=True)
class Quiescence:
    """The settled rule's inputs and answer: refinement idle and no child still working."""

    refinement_idle: bool
    pending: int
    in_flight: int
    children: int
    last_refinement_id: str | None

    @property
    def quiescent(self) -> bool:
        return self.refinement_idle and self.children == 0

    @classmethod
    def at(cls, event: QuiescenceChanged, *, children: int) -> Quiescence:
        """The rule applied to a published transition (its counts as they were then)."""
        return cls(event.quiescent, event.pending, event.in_flight, children, event.last_refinement_id)


def _no_children() -> int:
    return 0


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


class HarnessService:
    """The decisions of one session's harness over its `scopes` (see the module docstring)."""

    def __init__(
        self,
        scopes: Scopes,
        *,
        session_id: str | None,
        trajectory: Callable[[], Sequence[TrajectoryItem]] = tuple,
        policy: Callable[[], Policy] = Policy,
        jobs: Jobs | None = None,
        pending: PendingReviews | None = None,
        children: Callable[[], int] = _no_children,
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
    ) -> HarnessService:
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

    # ------------------------------------------------------------ rollback

    async def rollback_one(self, refinement_id: str, *, force: bool = False) -> RefinementResult:
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
        result = await self.rollback_one(refinement_id, force=force)
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
        return (await self.rollback_one(partner)).id

    # ------------------------------------------------------------ promotion

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

    # ------------------------------------------------------------ review decisions

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
