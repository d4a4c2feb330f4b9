"""The plan pipeline: one refinement job from the transcript to a decision.

Gate (automatic triggers only), then plan with a baseline snapshot of the target store, then the
planner's project edits (refused at once when they break the project rule, otherwise held for
review) and the rest through the service's policy (apply now or hold for review). A failure of
the model or of the reply becomes a failure card, never an exception out of the worker.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import anyio

from agent_core.errors import ModelError
from agent_core.refinement.extract import ReplyParseError
from agent_core.refinement.jobs import Job
from agent_core.refinement.planner import Plan, RefinementPlanner
from agent_core.refinement.records import RefinementOutcome
from agent_core.refinement.reporting import report_failure
from agent_core.refinement.service import HarnessService
from agent_core.refinement.trajectory import TrajectoryItem, message_ids
from harness_store import HarnessState, Proposal, render_overview

if TYPE_CHECKING:
    from agent_core.refinement.replay import ReplayReport
    from agent_core.refinement.replay_run import Replayer

log = logging.getLogger("agent_core.refinement.coordinator")

HISTORY_LINES = 10


class PlanPipeline:
    """Runs jobs for one session's `service` with `planner` (None: refinement needs a model)."""

    def __init__(self, service: HarnessService, planner: RefinementPlanner | None) -> None:
        self.service = service
        self.planner = planner
        self.last: RefinementOutcome | None = None
        # Replays a proposal that claims to fix a failed step (`refine_verify = "replay"`); set by
        # attach (None: this session cannot replay, and a claim is decided without one).
        self.replayer: Replayer | None = None

    async def run(self, job: Job) -> RefinementOutcome:
        try:
            outcome = await self._plan_and_decide(job)
        except (ReplyParseError, ModelError) as exc:
            outcome = self._failed(job, str(exc))
        except Exception as exc:
            log.exception("refinement %s failed", job.job_id)
            outcome = self._failed(job, f"refinement failed: {type(exc).__name__}: {exc}")
        finally:
            self.service.jobs.finished(job)
        self.last = outcome
        job.outcome = outcome
        job.done.set()
        return outcome

    def _failed(self, job: Job, message: str) -> RefinementOutcome:
        self.service.emit(report_failure(job.job_id, job.scope, message))
        return RefinementOutcome(job.job_id, job.trigger, job.scope, "failed", error=message)

    async def _plan_and_decide(self, job: Job) -> RefinementOutcome:
        if self.planner is None:
            raise ModelError("refinement needs a model; set CONTINUAL_ACP_MODEL")
        service = self.service
        items = await service.items()
        scope, instructions = job.scope, job.instructions
        has_project = service.scopes.project is not None
        if job.gate:
            verdict = await self.planner.review(items, trigger_note=job.note, project=has_project)
            if not verdict.should_refine:
                return RefinementOutcome(
                    job.job_id, job.trigger, scope, "declined", summary=verdict.rationale
                )
            scope, instructions = verdict.scope, verdict.instructions
        store = service.scopes.store(scope)
        # The planning baseline: what the planner saw. Apply refuses an entry that moved since.
        baseline: HarnessState = await anyio.to_thread.run_sync(store.load)
        states = await anyio.to_thread.run_sync(service.scopes.states)
        overview = render_overview(states.merged())
        history = [
            f"{r.id} ({r.scope}, {r.trigger}): {r.summary}"
            for r in await anyio.to_thread.run_sync(partial(store.history, limit=HISTORY_LINES))
        ]
        plan: Plan = await self.planner.plan(
            items,
            overview=overview,
            history=history,
            scope=scope,
            instructions=instructions,
            project=has_project,
            entry_ids={kind: list(items) for kind, items in baseline.entries.items()},
        )
        project_outcome: RefinementOutcome | None = None
        if scope == "project" or plan.project is not None:
            # Project edits, whether the refinement's scope or marked by the planner.
            marked = plan.proposal if scope == "project" else plan.project
            assert marked is not None
            project_baseline = baseline if scope == "project" else states.project
            project_outcome = await self._submit_project(job, marked, project_baseline, items)
            if scope == "project":
                return project_outcome
        proposal = plan.proposal
        if not proposal.edits:
            if project_outcome is not None:
                return project_outcome
            summary = proposal.summary or "nothing worth keeping in the harness"
            return RefinementOutcome(job.job_id, job.trigger, scope, "empty", summary=summary)
        replay: ReplayReport | None = None
        if plan.fixes is not None and self.replayer is not None and service.replays():
            replay = await self.replayer.replay(proposal, fixes=plan.fixes, items=items)
        return await service.submit(
            proposal,
            scope=scope,
            trigger=job.trigger,
            baseline=baseline,
            items=items,
            interactive=job.interactive,
            replay=replay,
        )

    async def _submit_project(
        self,
        job: Job,
        proposal: Proposal,
        baseline: HarnessState | None,
        items: list[TrajectoryItem],
    ) -> RefinementOutcome:
        """The planner's project edits: those that break the project rule are refused now (the
        store refuses them itself, with the reason, in a recorded refinement); the rest wait for
        review (a project edit always does)."""
        service = self.service
        if not proposal.edits:
            summary = proposal.summary or "nothing worth keeping in the harness"
            return RefinementOutcome(job.job_id, job.trigger, "project", "empty", summary=summary)
        project = service.scopes.project
        if project is None:
            return self._failed(
                job,
                f"the planner proposed {len(proposal.edits)} project edit(s), but this session has no "
                "project harness (its cwd is not in a git repository); nothing was applied",
            )
        errors = await anyio.to_thread.run_sync(
            partial(project.rule_errors, proposal, source="refine", trigger=job.trigger)
        )
        broken = [edit for edit, error in zip(proposal.edits, errors, strict=True) if error]
        kept = [edit for edit, error in zip(proposal.edits, errors, strict=True) if not error]
        outcome: RefinementOutcome | None = None
        if broken:
            result = await service.apply(
                proposal.model_copy(update={"edits": broken}),
                scope="project",
                trigger=job.trigger,
                baseline=baseline,
                known=message_ids(items),
                source="refine",
                verify=False,  # refused by the rule whatever a skill check would say: no scratch kernel
            )
            outcome = service.report(result, job.trigger)
        if kept:
            outcome = await service.submit(
                proposal.model_copy(update={"edits": kept}),
                scope="project",
                trigger=job.trigger,
                baseline=baseline,
                items=items,
                interactive=job.interactive,
            )
        assert outcome is not None
        return outcome
