"""The refinement coordinator: one per session, it puts the refinement parts together.

* **Jobs** (jobs.py): `/refine` (`refine_now`, in the caller's task), `refine.run()` from a cell
  (held until the turn ends), automatic review every K assistant turns or after compaction with a
  cooldown; the background worker and the quiescence counters.
* **The plan pipeline** (pipeline.py): gate, plan with a baseline snapshot, project edits.
* **Decisions** (service.py, `HarnessService`): apply now or hold for review per the policy,
  decide, promote, roll back; each reported on the ordered outbox (a quiescence waiter wakes only
  after the listeners received the transition).
* **Pending reviews** (pending_reviews.py): kept until decided, on disk too; refreshed from disk
  when asked.

The worker and the outbox run in `serve()`: `SessionRefinement.start()` (attach.py) runs it as a
task on the session's event loop and cancels it when the session closes; tests run it in a task
group (`tg.start(coordinator.serve)`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from agent_core.refinement.jobs import DEFAULT_AUTO_EVERY, DEFAULT_COOLDOWN_SECONDS, Job, Jobs
from agent_core.refinement.outbox import Listener, Outbox
from agent_core.refinement.pending_reviews import PendingReviews
from agent_core.refinement.pipeline import HISTORY_LINES, PlanPipeline
from agent_core.refinement.planner import RefinementPlanner
from agent_core.refinement.policy import Policy, TrustKey
from agent_core.refinement.records import PendingReview, RefinementOutcome, ReviewChoice, Scope, Trigger
from agent_core.refinement.service import HarnessService
from agent_core.refinement.trajectory import TrajectoryItem
from harness_store import HarnessState, HarnessStore, ProjectStore, Proposal, RefinementResult, Scopes
from harness_store.verify import PreApplyVerifier

if TYPE_CHECKING:
    from agent_core.control_plane.held import HeldChange

__all__ = [
    "DEFAULT_AUTO_EVERY",
    "DEFAULT_COOLDOWN_SECONDS",
    "HISTORY_LINES",
    "Policy",
    "RefinementCoordinator",
]


class RefinementCoordinator:
    """One session's refinement: `jobs`, `pipeline`, `service` and its `pending` reviews."""

    def __init__(
        self,
        *,
        session_id: str,
        local_store: HarnessStore,
        global_store: HarnessStore,
        planner: RefinementPlanner | None,
        trajectory: Callable[[], Sequence[TrajectoryItem]],
        policy: Callable[[], Policy] = Policy,
        auto_every: int = DEFAULT_AUTO_EVERY,
        cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        project_store: ProjectStore | None = None,
    ) -> None:
        self.session_id = session_id
        self.scopes = Scopes(local_store, global_store, project_store)
        self.jobs = Jobs(
            Outbox(),
            auto_every=auto_every,
            cooldown_seconds=cooldown_seconds,
            clock=clock,
            can_auto=lambda: self.pipeline.planner is not None,
        )
        self.service = HarnessService(
            self.scopes,
            session_id=session_id,
            trajectory=trajectory,
            policy=policy,
            jobs=self.jobs,
            pending=PendingReviews(self.scopes, session_id),
        )
        self.pipeline = PlanPipeline(self.service, planner)

    # ------------------------------------------------------------ the parts' public faces

    @property
    def local_store(self) -> HarnessStore:
        return self.scopes.local

    @property
    def global_store(self) -> HarnessStore:
        return self.scopes.global_

    @property
    def project_store(self) -> ProjectStore | None:
        return self.scopes.project

    @property
    def planner(self) -> RefinementPlanner | None:
        return self.pipeline.planner

    @property
    def outbox(self) -> Outbox:
        return self.jobs.outbox

    @property
    def trusted(self) -> set[TrustKey]:
        return self.service.trusted

    @property
    def skill_verifier(self) -> Callable[[str], PreApplyVerifier] | None:
        """scope -> the store's pre-apply skill verifier (set by attach; None = unchecked)."""
        return self.service.skill_verifier

    @skill_verifier.setter
    def skill_verifier(self, verifier: Callable[[str], PreApplyVerifier] | None) -> None:
        self.service.skill_verifier = verifier

    @property
    def last(self) -> RefinementOutcome | None:
        return self.pipeline.last

    @property
    def last_refinement_id(self) -> str | None:
        return self.jobs.last_refinement_id

    @property
    def auto_every(self) -> int:
        return self.jobs.auto_every

    @property
    def cooldown_seconds(self) -> float:
        return self.jobs.cooldown_seconds

    # ------------------------------------------------------------ listeners and quiescence

    def add_listener(self, listener: Listener) -> None:
        """`listener` receives every report and transition, in order; it is awaited before waiters wake."""
        self.outbox.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        self.outbox.remove_listener(listener)

    @property
    def pending_reviews(self) -> dict[str, PendingReview]:
        """Proposals waiting for a human decision, oldest first, refreshed from disk now."""
        return self.service.pending.refresh()

    @property
    def pending(self) -> int:
        return self.jobs.pending

    @property
    def in_flight(self) -> int:
        return self.jobs.in_flight

    @property
    def quiescent(self) -> bool:
        """As published: True only once nothing is pending or running."""
        return self.outbox.quiescent

    def status(self) -> dict[str, Any]:
        return {
            "quiescent": self.outbox.quiescent,
            "pending": self.pending,
            "in_flight": self.in_flight,
            "awaiting_review": len(self.pending_reviews),
            "last_refinement_id": self.last_refinement_id,
            "last": self.last.to_json() if self.last else None,
        }

    async def wait_quiescent(self, timeout: float | None = None) -> bool:
        """Wait until settled (and the settling transition was delivered); False on timeout."""
        return await self.outbox.wait_quiescent(timeout)

    async def flushed(self, timeout: float = 30.0) -> bool:
        """Wait until every event emitted so far reached the listeners (False if not served)."""
        return await self.outbox.flushed(timeout)

    # ------------------------------------------------------------ the worker and triggers

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the outbox and the worker until cancelled (the session's task group owns this)."""
        await self.jobs.serve(self.pipeline.run, task_status=task_status)

    def schedule_from_cell(self, instructions: str | None, scope: Scope) -> dict[str, Any]:
        """`await refine.run()` in a cell: held until the turn ends, then run in the background."""
        job = Job("model", scope, instructions, gate=False)
        self.jobs.schedule(job)
        return {
            "scheduled": True,
            "job_id": job.job_id,
            "scope": scope,
            "message": "refinement scheduled; it runs when this turn ends",
        }

    def turn_ended(self) -> None:
        """Call at the end of every assistant turn, before the prompt is answered."""
        self.jobs.turn_ended()

    def turn_failed(self) -> None:
        """The turn ended with an error (no `TurnFinished` was published)."""
        self.jobs.turn_failed()

    def checkpoint(self, note: str) -> None:
        """An autonomous-mode checkpoint: a natural point for an automatic review (cooldown applies)."""
        self.jobs.queue_auto(note)
        self.jobs.transition()

    def compacted(self) -> None:
        """The conversation was just compacted: a natural point for an automatic review."""
        self.jobs.queue_auto("the conversation was just compacted")
        self.jobs.transition()

    async def refine_now(
        self, *, instructions: str | None = None, scope: Scope = "local"
    ) -> RefinementOutcome:
        """`/refine`: plan (no review gate: the user asked) and apply or hold for review, in this task."""
        async with self.jobs.busy():
            return await self.pipeline.run(Job("user", scope, instructions, gate=False, interactive=True))

    # ------------------------------------------------------------ decisions (the service's)

    def locate(self, refinement_id: str) -> tuple[Scope, RefinementResult] | None:
        """The scope whose history holds `refinement_id`, and the record (blocking)."""
        return self.scopes.locate(refinement_id)

    def view_path(self, scope: str, kind: str, entry_id: str) -> str | None:
        return self.service.view_path(scope, kind, entry_id)

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
    ) -> RefinementOutcome:
        """Apply now or hold for review, per the policy (`HarnessService.submit`)."""
        return await self.service.submit(
            proposal,
            scope=scope,
            trigger=trigger,
            baseline=baseline,
            items=items,
            mode_override=mode_override,
            source=source,
            interactive=interactive,
        )

    async def rollback(self, refinement_id: str, *, force: bool = False) -> RefinementResult:
        """Roll back one refinement of any scope and report it (`HarnessService.rollback_one`)."""
        return await self.service._rollback_one(refinement_id, force=force)

    async def apply_user(self, proposal: Proposal, *, scope: Scope) -> RefinementResult:
        """Apply a proposal a user asked for by command now, no review, and report it."""
        return await self.service.apply_user(proposal, scope=scope)

    async def decide(
        self, proposal_id: str, choice: ReviewChoice, *, edit_ids: Sequence[str] | None = None
    ) -> RefinementOutcome:
        """Decide a pending review (or review applied candidates by id); no `ReviewDecided`
        (the surface's decide announces it)."""
        return await self.service.decide(proposal_id, choice, edit_ids=edit_ids, announce=False)

    def reviews_promotion(self, scope: Scope, kinds: set[str]) -> bool:
        return self.service.reviews_promotion(scope, kinds)

    async def hold_change(self, held: HeldChange) -> PendingReview:
        """Hold a cell's change to `.continual-acp/` as a pending review (`HarnessService.hold_change`)."""
        return await self.service.hold_change(held)

    async def hold_promotion(
        self, proposal: Proposal, *, scope: Scope, entry: tuple[str, str]
    ) -> PendingReview:
        return await self.service.hold_promotion(proposal, scope=scope, entry=entry)
