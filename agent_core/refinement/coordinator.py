"""The refinement coordinator: one per session, it runs refinement work off the critical path.

It owns three things a session needs and a server reports:

* **Triggers**: `/refine` (`refine_now`, in the caller's task), `refine.run()` from a cell (held until
  the turn ends), and automatic review every K assistant turns or after compaction, with a cooldown
  that a failed review stamps too.
* **Decisions**: plan with a baseline snapshot, then either apply under the store lock (the store
  re-reads and compares against the baseline) or hold the proposal as a pending review, per the
  review policy (policy.py). Pending reviews are kept until decided, on disk too (pending_files.py):
  a local one with the session, a global one where every later session finds it.
* **Quiescence**: `pending` (queued or waiting for the turn to end), `in_flight` (running), the last
  refinement id, and an awaitable "settled". Transitions go out through the same ordered outbox as
  refinement reports, and a waiter wakes only after the listeners have received the transition.

The background worker and the outbox run in `serve()`: `SessionRefinement.start()` (attach.py) runs
it as a task on the session's event loop and cancels it when the session closes; tests run it in a
task group (`tg.start(coordinator.serve)`).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio

from agent_core.control_plane.held import HeldChange
from agent_core.errors import ModelError
from agent_core.refinement.extract import ReplyParseError
from agent_core.refinement.outbox import CoordinatorEvent, Listener, Outbox
from agent_core.refinement.pending_files import (
    PendingFiles,
    migrate_in_repo_pending,
    pending_dir,
    project_pending_dir,
)
from agent_core.refinement.planner import Plan, RefinementPlanner
from agent_core.refinement.policy import TrustKey, needs_review
from agent_core.refinement.records import (
    OutcomeStatus,
    PendingReview,
    QuiescenceChanged,
    RefinementOutcome,
    ReviewChoice,
    ReviewRequested,
    Scope,
    Trigger,
    UnknownRefinement,
    new_job_id,
)
from agent_core.refinement.reporting import report_failure, report_rejection, report_result
from agent_core.refinement.trajectory import TrajectoryItem, message_ids
from harness_store import (
    HarnessState,
    HarnessStore,
    ProjectStore,
    Proposal,
    RefinementResult,
    Scopes,
    Store,
    render_overview,
)
from harness_store.errors import ReviewAlreadyDecided, ReviewNotFound

log = logging.getLogger(__name__)

DEFAULT_AUTO_EVERY = 25
DEFAULT_COOLDOWN_SECONDS = 300.0
HISTORY_LINES = 10


@dataclass(frozen=True)
class Policy:
    """The session settings the coordinator reads at decision time (they can change mid-session)."""

    mode: str = "auto"
    refine_review: str = "global_only"


@dataclass
class _Job:
    trigger: Trigger
    scope: Scope
    instructions: str | None
    gate: bool  # ask the review gate first (automatic triggers only)
    note: str = ""
    interactive: bool = False
    job_id: str = field(default_factory=lambda: new_job_id("job"))
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: RefinementOutcome | None = None


class RefinementCoordinator:
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
        self.local_store = local_store
        self.global_store = global_store
        # trust (issue 15): the repository's ProjectStore when the session's cwd is in one.
        self.project_store = project_store
        self.scopes = Scopes(local_store, global_store, project_store)
        self.planner = planner
        self._trajectory = trajectory
        self._policy = policy
        self.auto_every = auto_every
        self.cooldown_seconds = cooldown_seconds
        self._clock = clock
        self._listeners: list[Listener] = []
        self._scheduled: list[_Job] = []  # from cells, waiting for the turn to end
        self._queue: deque[_Job] = deque()
        self._wakeup = anyio.Event()
        self._in_flight = 0
        self._turns_since_auto = 0
        self._last_auto_finished: float | None = None
        self._auto_queued = False
        self._pending_reviews: dict[str, PendingReview] = {}
        self._pending_files: dict[Scope, PendingFiles] = {
            "local": PendingFiles(pending_dir(local_store)),
            "global": PendingFiles(pending_dir(global_store)),
        }
        if project_store is not None:
            # trust (issue 15): per user, under the data dir, never in the repository.
            per_user = project_pending_dir(global_store, project_store)
            migrate_in_repo_pending(pending_dir(project_store), per_user)
            self._pending_files["project"] = PendingFiles(per_user)
        for scope in self._pending_files:
            for saved in self._pending_files[scope].load_all():
                if saved.scope == scope:
                    self._pending_reviews[saved.proposal_id] = saved
        self.trusted: set[TrustKey] = set()
        self.last: RefinementOutcome | None = None
        self.last_refinement_id: str | None = None
        self.outbox = Outbox()
        # trust (issue 15): scope -> the store's pre-apply skill verifier (set by attach; None = unchecked).
        self.skill_verifier: Callable[[str], Any] | None = None

    # ------------------------------------------------------------ listeners and quiescence

    def add_listener(self, listener: Listener) -> None:
        """`listener` receives every report and transition, in order; it is awaited before waiters wake."""
        self.outbox.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        self.outbox.remove_listener(listener)

    @property
    def pending_reviews(self) -> dict[str, PendingReview]:
        """Proposals waiting for a human decision, oldest first: this session's, and every global
        (and this repository's project) one on disk (made by any session, this process or another;
        one decided elsewhere drops out, of any scope)."""
        for shared in ("global", "project"):
            files = self._pending_files.get(shared)
            if files is None or files.directory is None:
                continue
            on_disk = files.ids()
            for proposal_id, waiting in list(self._pending_reviews.items()):
                if waiting.scope == shared and proposal_id not in on_disk and waiting.saved:
                    del self._pending_reviews[proposal_id]
            fresh = [files.load(i) for i in sorted(on_disk - self._pending_reviews.keys())]
            for saved in sorted((p for p in fresh if p is not None), key=lambda p: p.created_at):
                if saved.scope == shared:
                    self._pending_reviews[saved.proposal_id] = saved
        # This session's own saved reviews decided by someone else (a review panel in another
        # process removed the file: its claim) are not asked again either.
        listed: dict[Scope, set[str]] = {}
        for proposal_id, waiting in list(self._pending_reviews.items()):
            own = self._pending_files.get(waiting.scope)
            if (
                waiting.scope in ("global", "project")
                or not waiting.saved
                or own is None
                or own.directory is None
            ):
                continue
            if waiting.scope not in listed:
                listed[waiting.scope] = own.ids()
            if proposal_id not in listed[waiting.scope]:
                del self._pending_reviews[proposal_id]
        return self._pending_reviews

    @property
    def pending(self) -> int:
        return len(self._scheduled) + len(self._queue)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def quiescent(self) -> bool:
        """As published: True only once nothing is pending or running."""
        return self.outbox.quiescent

    def status(self) -> dict[str, Any]:
        return {
            "quiescent": self.outbox.quiescent,
            "pending": self.pending,
            "in_flight": self._in_flight,
            "awaiting_review": len(self.pending_reviews),
            "last_refinement_id": self.last_refinement_id,
            "last": self.last.to_json() if self.last else None,
        }

    def _emit(self, event: CoordinatorEvent) -> None:
        self.outbox.emit(event)

    def _transition(self) -> None:
        """Publish a quiescence flip if the counters say one happened (call after every change)."""
        now_quiescent = self.pending == 0 and self._in_flight == 0
        if now_quiescent != self.outbox.quiescent:
            self.outbox.publish(
                QuiescenceChanged(now_quiescent, self.pending, self._in_flight, self.last_refinement_id)
            )

    async def wait_quiescent(self, timeout: float | None = None) -> bool:
        """Wait until settled (and the settling transition was delivered); False on timeout."""
        return await self.outbox.wait_quiescent(timeout)

    async def flushed(self, timeout: float = 30.0) -> bool:
        """Wait until every event emitted so far reached the listeners.

        A command that reports through the outbox (`/refine`) awaits this before it answers, so the
        refinement card goes out before the prompt response. False if the outbox is not served.
        """
        return await self.outbox.flushed(timeout)

    # ------------------------------------------------------------ the background worker

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the outbox and the worker until cancelled (the session's task group owns this)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.outbox.deliver)
            task_status.started()
            while True:
                while not self._queue:
                    await self._wakeup.wait()
                    self._wakeup = anyio.Event()
                job = self._queue.popleft()
                self._in_flight += 1
                try:
                    await self._run(job)
                finally:
                    self._in_flight -= 1
                    self._transition()

    # ------------------------------------------------------------ triggers

    def schedule_from_cell(self, instructions: str | None, scope: Scope) -> dict[str, Any]:
        """`await refine.run()` in a cell: held until the turn ends, then run in the background."""
        job = _Job("model", scope, instructions, gate=False)
        self._scheduled.append(job)
        self._transition()
        return {
            "scheduled": True,
            "job_id": job.job_id,
            "scope": scope,
            "message": "refinement scheduled; it runs when this turn ends",
        }

    def turn_ended(self) -> None:
        """Call at the end of every assistant turn, before the prompt is answered.

        Releases refinements scheduled from cells and, every `auto_every` turns, queues an automatic
        review -- synchronously, so a status read right after the prompt response already sees it.
        """
        self._release_scheduled()
        self._turns_since_auto += 1
        if self.auto_every > 0 and self._turns_since_auto >= self.auto_every:
            if self._queue_auto(f"{self._turns_since_auto} assistant turns since the last review"):
                self._turns_since_auto = 0
        if self._queue:
            self._wakeup.set()
        self._transition()

    def turn_failed(self) -> None:
        """The turn ended with an error (no after-turn hooks ran): still run what its cells asked for,
        or the session would never become quiescent again."""
        self._release_scheduled()
        if self._queue:
            self._wakeup.set()
        self._transition()

    def _release_scheduled(self) -> None:
        released, self._scheduled = self._scheduled, []
        self._queue.extend(released)

    def checkpoint(self, note: str) -> None:
        """An autonomous-mode checkpoint: a natural point for an automatic review (cooldown applies)."""
        self._queue_auto(note)
        self._transition()

    def compacted(self) -> None:
        """The conversation was just compacted: a natural point for an automatic review."""
        self._queue_auto("the conversation was just compacted")
        self._transition()

    def _cooling_down(self) -> bool:
        if self._last_auto_finished is None:
            return False
        return self._clock() - self._last_auto_finished < self.cooldown_seconds

    def _queue_auto(self, note: str) -> bool:
        # `auto_refine_every = 0` turns automatic reviews off entirely: after a compaction and at
        # autonomous checkpoints too, not only the every-K-turns one.
        if self.auto_every <= 0 or self._auto_queued or self._cooling_down() or self.planner is None:
            return False
        self._auto_queued = True
        self._queue.append(_Job("auto", "local", None, gate=True, note=note))
        self._wakeup.set()
        return True

    async def refine_now(
        self, *, instructions: str | None = None, scope: Scope = "local"
    ) -> RefinementOutcome:
        """`/refine`: plan (no review gate: the user asked) and apply or hold for review, in this task."""
        job = _Job("user", scope, instructions, gate=False, interactive=True)
        self._in_flight += 1
        self._transition()
        try:
            return await self._run(job)
        finally:
            self._in_flight -= 1
            self._transition()

    # ------------------------------------------------------------ one job

    def _save_pending(self, pending: PendingReview) -> None:
        pending.saved = self._pending_files[pending.scope].save(pending, self.session_id)

    def _store(self, scope: Scope) -> Store:
        return self.scopes.store(scope)

    async def _run(self, job: _Job) -> RefinementOutcome:
        try:
            outcome = await self._plan_and_decide(job)
        except (ReplyParseError, ModelError) as exc:
            outcome = self._failed(job, str(exc))
        except Exception as exc:
            log.exception("refinement %s failed", job.job_id)
            outcome = self._failed(job, f"refinement failed: {type(exc).__name__}: {exc}")
        finally:
            if job.trigger == "auto":
                # A failed review stamps the cooldown too: a broken endpoint must not be hammered.
                self._auto_queued = False
                self._last_auto_finished = self._clock()
        self.last = outcome
        job.outcome = outcome
        job.done.set()
        return outcome

    def _failed(self, job: _Job, message: str) -> RefinementOutcome:
        self._emit(report_failure(job.job_id, job.scope, message))
        return RefinementOutcome(job.job_id, job.trigger, job.scope, "failed", error=message)

    async def _plan_and_decide(self, job: _Job) -> RefinementOutcome:
        if self.planner is None:
            raise ModelError("refinement needs a model; set CONTINUAL_ACP_MODEL")
        # Reading the transcript is file I/O: off the event loop, which is busy answering the prompt.
        items = await self._items()
        scope, instructions = job.scope, job.instructions
        has_project = self.project_store is not None
        if job.gate:
            verdict = await self.planner.review(items, trigger_note=job.note, project=has_project)
            if not verdict.should_refine:
                return RefinementOutcome(
                    job.job_id, job.trigger, scope, "declined", summary=verdict.rationale
                )
            scope, instructions = verdict.scope, verdict.instructions
        store = self._store(scope)
        # The planning baseline: what the planner saw. Apply refuses an entry that moved since.
        baseline: HarnessState = await anyio.to_thread.run_sync(store.load)
        states = await anyio.to_thread.run_sync(self.scopes.states)
        project_state = states.project
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
        )
        project_outcome: RefinementOutcome | None = None
        if scope == "project" or plan.project is not None:
            # trust (issue 15): project edits, whether the refinement's scope or marked by the planner.
            marked = plan.proposal if scope == "project" else plan.project
            assert marked is not None
            project_baseline = baseline if scope == "project" else project_state
            project_outcome = await self._submit_project(job, marked, project_baseline, items)
            if scope == "project":
                return project_outcome
        proposal = plan.proposal
        if not proposal.edits:
            if project_outcome is not None:
                return project_outcome
            summary = proposal.summary or "nothing worth keeping in the harness"
            return RefinementOutcome(job.job_id, job.trigger, scope, "empty", summary=summary)
        return await self.submit(
            proposal,
            scope=scope,
            trigger=job.trigger,
            baseline=baseline,
            items=items,
            interactive=job.interactive,
        )

    async def _submit_project(
        self,
        job: _Job,
        proposal: Proposal,
        baseline: HarnessState | None,
        items: Sequence[TrajectoryItem],
    ) -> RefinementOutcome:
        """The planner's project edits: those that break the project rule are refused now (the
        store refuses them itself, with the reason, in a recorded refinement); the rest wait for
        review (a project edit always does)."""
        if not proposal.edits:
            summary = proposal.summary or "nothing worth keeping in the harness"
            return RefinementOutcome(job.job_id, job.trigger, "project", "empty", summary=summary)
        if self.project_store is None:
            return self._failed(
                job,
                f"the planner proposed {len(proposal.edits)} project edit(s), but this session has no "
                "project harness (its cwd is not in a git repository); nothing was applied",
            )
        errors = await anyio.to_thread.run_sync(
            partial(self.project_store.rule_errors, proposal, source="refine", trigger=job.trigger)
        )
        broken = [edit for edit, error in zip(proposal.edits, errors, strict=True) if error]
        kept = [edit for edit, error in zip(proposal.edits, errors, strict=True) if not error]
        outcome: RefinementOutcome | None = None
        if broken:
            result = await self._apply(
                proposal.model_copy(update={"edits": broken}),
                scope="project",
                trigger=job.trigger,
                baseline=baseline,
                known=message_ids(items),
                source="refine",
                verify=False,  # refused by the rule whatever a skill check would say: no scratch kernel
            )
            outcome = self._applied(result, job.trigger)
        if kept:
            outcome = await self.submit(
                proposal.model_copy(update={"edits": kept}),
                scope="project",
                trigger=job.trigger,
                baseline=baseline,
                items=items,
                interactive=job.interactive,
            )
        assert outcome is not None
        return outcome

    async def _items(self) -> list[TrajectoryItem]:
        return await anyio.to_thread.run_sync(lambda: list(self._trajectory()))

    def locate(self, refinement_id: str) -> tuple[Scope, RefinementResult] | None:
        """The scope whose history holds `refinement_id`, and the record (blocking; scopes.py)."""
        return self.scopes.locate(refinement_id)

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
        """Apply now or hold for review, per the policy. Also the path of direct kernel writes.

        `source` is who wrote the content: `refine` (the planner, even when the user asked for the
        refinement) or `agent` (a cell). Neither bypasses tombstones; only user-written content does.
        """
        policy = self._policy()
        kinds = {edit.kind for edit in proposal.edits}
        mode = mode_override or policy.mode
        if needs_review(
            scope=scope, mode=mode, refine_review=policy.refine_review, kinds=kinds, trusted=self.trusted
        ):
            pending = PendingReview(
                proposal_id=new_job_id("p"),
                proposal=proposal,
                scope=scope,
                trigger=trigger,
                baseline=baseline if baseline is not None else self._store(scope).load(),
                source=source,
                interactive=interactive,
            )
            self._pending_reviews[pending.proposal_id] = pending
            await anyio.to_thread.run_sync(self._save_pending, pending)
            self._emit(ReviewRequested(pending))
            return RefinementOutcome(
                pending.proposal_id,
                trigger,
                scope,
                "pending_review",
                proposal_id=pending.proposal_id,
                summary=proposal.summary,
            )
        known = message_ids(items if items is not None else await self._items())
        result = await self._apply(
            proposal, scope=scope, trigger=trigger, baseline=baseline, known=known, source=source
        )
        return self._applied(result, trigger)

    async def _apply(
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
        store = self._store(scope)
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
        if self.skill_verifier is not None and verify:  # trust (issue 15): skills checked before they apply
            kwargs["verifier"] = self.skill_verifier(scope)
        if scope == "local":
            # Lets the store refuse a local update of a global id by name ("read-only"), not "not found".
            kwargs["global_state"] = await anyio.to_thread.run_sync(self.global_store.load)
        return await anyio.to_thread.run_sync(partial(store.apply, proposal, **kwargs))

    def _applied(self, result: RefinementResult, trigger: Trigger) -> RefinementOutcome:
        self.last_refinement_id = result.id
        self._emit(report_result(result, view_path=self.view_path))
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
        )

    def view_path(self, scope: str, kind: str, entry_id: str) -> str | None:
        """The view file an edit of this entry is shown under (the diff path of review cards)."""
        try:
            return str(self._store(scope).view_path(kind, entry_id, scope=scope))  # type: ignore[arg-type]
        except Exception:
            log.exception("no view path for %s %s/%s", scope, kind, entry_id)
            return None

    async def rollback(self, refinement_id: str, *, force: bool = False) -> RefinementResult:
        """Roll back a refinement of this session's or the global store (no model call) and report it.

        Raises `UnknownRefinement` when neither store has the id. A refused rollback is returned (and reported),
        not raised: its `errors` name the edits that conflict.
        """
        self._in_flight += 1
        self._transition()
        try:
            found = await anyio.to_thread.run_sync(self.locate, refinement_id)
            if found is None:
                raise UnknownRefinement(refinement_id)
            store = self._store(found[0])
            result: RefinementResult = await anyio.to_thread.run_sync(
                partial(store.rollback, refinement_id, force=force)
            )
            self._applied(result, "user")
            return result
        finally:
            self._in_flight -= 1
            self._transition()

    async def apply_user(self, proposal: Proposal, *, scope: Scope) -> RefinementResult:
        """Apply a proposal a user asked for by command (`/promote`) now, no review, and report it
        (a card, a history record that `/rollback` undoes). Validation, tombstones and the skill
        check still apply."""
        self._in_flight += 1
        self._transition()
        try:
            result = await self._apply(
                proposal, scope=scope, trigger="user", baseline=None, known=None, source="user"
            )
            self._applied(result, "user")
            return result
        finally:
            self._in_flight -= 1
            self._transition()

    # ------------------------------------------------------------ review decisions

    async def decide(
        self, proposal_id: str, choice: ReviewChoice, *, edit_ids: Sequence[str] | None = None
    ) -> RefinementOutcome:
        """Decide a pending review (or review an applied refinement of candidates by its id).

        Raises `ReviewNotFound` naming the id when there is nothing to decide under it, and
        `ReviewAlreadyDecided` when another session claimed the proposal first.
        """
        self._in_flight += 1
        self._transition()
        try:
            pending = self.pending_reviews.pop(proposal_id, None)
            # Removing the file is the claim: a global proposal decided meanwhile by another
            # session (or process) is not decided twice.
            if pending is not None and not self._pending_files[pending.scope].remove(proposal_id):
                if pending.saved:
                    raise ReviewAlreadyDecided(proposal_id)
            if pending is None:
                return await self._review_applied(proposal_id, choice, edit_ids)
            return await self._decide_pending(pending, choice, edit_ids)
        finally:
            self._in_flight -= 1
            self._transition()

    async def _decide_pending(
        self, pending: PendingReview, choice: ReviewChoice, edit_ids: Sequence[str] | None
    ) -> RefinementOutcome:
        if pending.held is not None:
            return await self._decide_held(pending, choice)
        proposal = _select(pending.proposal, edit_ids)
        store = self._store(pending.scope)
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
                        reason=f"{choice} in review of proposal {pending.proposal_id}",
                    )
                )
            message = "rejected in review" + (" forever (tombstoned)" if forever else "")
            self._emit(report_rejection(pending, proposal, message, [s.id for s in stones]))
            return RefinementOutcome(
                pending.proposal_id,
                pending.trigger,
                pending.scope,
                "rejected",
                proposal_id=pending.proposal_id,
                summary=proposal.summary,
                error=message,
            )
        if choice == "apply_always":
            self.trusted.update((pending.scope, kind) for kind in pending.kinds)
        result = await self._apply(
            proposal,
            scope=pending.scope,
            trigger=pending.trigger,
            baseline=pending.baseline,
            # A promotion's evidence was checked when its entry was written (maybe in another
            # session's transcript); the user's command is the reason now.
            known=None if pending.promotion_of is not None else message_ids(await self._items()),
            source=pending.source,
        )
        if result.applied and pending.trigger != "user":
            # Approved by a human: promote what was written from candidate to verified.
            await anyio.to_thread.run_sync(partial(store.record_review, result.id, "apply"))
        outcome = self._applied(result, pending.trigger)
        if result.applied and pending.promotion_of is not None:
            await self._remove_promoted(pending, result.id)
        return outcome

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
        """`/promote` to a scope that is always reviewed (project): hold the target's create as a
        pending review; approving it applies the create, then deletes the local copy `entry`
        (kind, id) -- the two undoable refinements of a promotion. Asked at once by the command."""
        pending = PendingReview(
            proposal_id=new_job_id("p"),
            proposal=proposal,
            scope=scope,
            trigger="user",
            baseline=await anyio.to_thread.run_sync(self._store(scope).load),
            source="user",
            interactive=True,
            promotion_of=entry,
        )
        self._pending_reviews[pending.proposal_id] = pending
        await anyio.to_thread.run_sync(self._save_pending, pending)
        self._emit(ReviewRequested(pending))
        return pending

    async def hold_change(self, held: HeldChange) -> PendingReview:
        """A cell changed `.continual-acp/` (already restored): hold it as a pending review of the
        session (its pending dir: `/review`, `_harness/review` and the panel list it). Never asked
        at once: the turn goes on and the card waits."""
        scope: Scope = "local"
        pending = PendingReview(
            proposal_id=new_job_id("p"),
            proposal=Proposal(
                summary=held.summary(),
                rationale=f"cell {held.cell_id or '(none)'} wrote the control plane {held.when}",
            ),
            scope=scope,
            trigger="model",
            baseline=HarnessState(),
            source="agent",
            held=held,
        )
        self._pending_reviews[pending.proposal_id] = pending
        await anyio.to_thread.run_sync(self._save_pending, pending)
        self._emit(ReviewRequested(pending))
        return pending

    async def _decide_held(self, pending: PendingReview, choice: ReviewChoice) -> RefinementOutcome:
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
        )

    async def _remove_promoted(self, pending: PendingReview, created_id: str) -> None:
        from agent_core.promotion import removal_proposal_for

        assert pending.promotion_of is not None
        kind, entry_id = pending.promotion_of
        removal = removal_proposal_for(kind, entry_id, pending.scope, created_id)
        result = await self._apply(
            removal, scope="local", trigger="user", baseline=None, known=None, source="user"
        )
        self._applied(result, "user")

    async def _review_applied(
        self, refinement_id: str, choice: ReviewChoice, edit_ids: Sequence[str] | None
    ) -> RefinementOutcome:
        found = await anyio.to_thread.run_sync(self.locate, refinement_id)
        if found is not None:
            scope, target = found
            decision = "apply" if choice == "apply_always" else choice
            if choice == "apply_always":
                self.trusted.update((target.scope, e.kind) for e in target.applied_edits if e.applied)
            kwargs: dict[str, Any] = {} if edit_ids is None else {"edit_ids": list(edit_ids)}
            result = await anyio.to_thread.run_sync(
                partial(self._store(scope).record_review, refinement_id, decision, **kwargs)
            )
            return self._applied(result, "user")
        known = ", ".join(self.pending_reviews) or "none"
        raise ReviewNotFound(
            refinement_id, f"no pending review or refinement {refinement_id!r} (pending reviews: {known})"
        )


def _select(proposal: Proposal, edit_ids: Sequence[str] | None) -> Proposal:
    """Only the edits whose (resolved) ids were chosen; all when `edit_ids` is None."""
    if edit_ids is None:
        return proposal
    from harness_store.validation import resolve_id

    wanted = set(edit_ids)
    edits = [edit for edit in proposal.edits if resolve_id(edit) in wanted]
    return proposal.model_copy(update={"edits": edits})
