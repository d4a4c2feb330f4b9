"""The refinement coordinator: the internal wiring of one session's refinement.

It builds and holds the parts -- `jobs` (jobs.py: triggers, the background worker, the quiescence
counters), `service` (service.py, `HarnessService`: every rule that changes the harness) and
`pipeline` (pipeline.py: gate, plan with a baseline snapshot, project edits) -- and adds only what
joins them: `serve()` (the worker and the ordered outbox), the triggers that build a job
(`refine_now`, `schedule_from_cell`, `checkpoint`, `compacted`). It answers no harness question:
everything outside asks the session's `HarnessSurface` (surface.py, `harness_of(session)`).

`SessionRefinement.start()` (attach.py) runs `serve()` as a task on the session's event loop and
cancels it when the session closes; tests run it in a task group (`tg.start(coordinator.serve)`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from agent_core.refinement.jobs import DEFAULT_AUTO_EVERY, DEFAULT_COOLDOWN_SECONDS, Job, Jobs
from agent_core.refinement.outbox import Outbox
from agent_core.refinement.pending_reviews import PendingReviews
from agent_core.refinement.pipeline import HISTORY_LINES, PlanPipeline
from agent_core.refinement.planner import RefinementPlanner
from agent_core.refinement.policy import Policy
from agent_core.refinement.records import RefinementOutcome, Scope
from agent_core.refinement.service import HarnessService
from agent_core.refinement.trajectory import TrajectoryItem
from harness_store import HarnessStore, ProjectStore, Scopes

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_AUTO_EVERY",
    "DEFAULT_COOLDOWN_SECONDS",
    "HISTORY_LINES",
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
