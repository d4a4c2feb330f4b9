"""Refinement jobs: the trigger queue, the background worker and the quiescence counters.

`pending` counts jobs queued or held until the turn ends, `in_flight` the work running now (a job,
or a decision/rollback a person asked for). Every change goes through `transition()`, which
publishes a `QuiescenceChanged` on the ordered outbox when settled flips; `busy()` is the one
bracket around work that is not a queued job.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import anyio.abc

from agent_core.refinement.outbox import Outbox
from agent_core.refinement.records import QuiescenceChanged, RefinementOutcome, Scope, Trigger, new_job_id

DEFAULT_AUTO_EVERY = 25
DEFAULT_COOLDOWN_SECONDS = 300.0


@dataclass
class Job:
    """One refinement to plan: who asked, for which scope, whether the review gate runs first."""

    trigger: Trigger
    scope: Scope
    instructions: str | None
    gate: bool  # ask the review gate first (automatic triggers only)
    note: str = ""
    interactive: bool = False
    job_id: str = field(default_factory=lambda: new_job_id("job"))
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: RefinementOutcome | None = None


class Jobs:
    """The queue, the worker and the counters of one session's refinement work."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        auto_every: int = DEFAULT_AUTO_EVERY,
        cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        can_auto: Callable[[], bool] = lambda: True,
    ) -> None:
        self.outbox = outbox
        self.auto_every = auto_every
        self.cooldown_seconds = cooldown_seconds
        self._clock = clock
        self._can_auto = can_auto
        self._scheduled: list[Job] = []  # from cells, waiting for the turn to end
        self._queue: deque[Job] = deque()
        self._wakeup = anyio.Event()
        self._in_flight = 0
        self._turns_since_auto = 0
        self._last_auto_finished: float | None = None
        self._auto_queued = False
        self.last_refinement_id: str | None = None

    # ------------------------------------------------------------ counters

    @property
    def pending(self) -> int:
        return len(self._scheduled) + len(self._queue)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def idle(self) -> bool:
        """Nothing queued, held or running, by the counters now."""
        return self.pending == 0 and self._in_flight == 0

    def transition(self) -> None:
        """Publish a quiescence flip if the counters say one happened (call after every change)."""
        if self.idle != self.outbox.quiescent:
            self.outbox.publish(
                QuiescenceChanged(self.idle, self.pending, self._in_flight, self.last_refinement_id)
            )

    @contextlib.asynccontextmanager
    async def busy(self) -> AsyncIterator[None]:
        """Count the enclosed work as in flight (the session is not settled while it runs)."""
        self._in_flight += 1
        self.transition()
        try:
            yield
        finally:
            self._in_flight -= 1
            self.transition()

    # ------------------------------------------------------------ the worker

    async def serve(
        self,
        run: Callable[[Job], Awaitable[object]],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the outbox and the worker (each queued job through `run`) until cancelled."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.outbox.deliver)
            task_status.started()
            while True:
                while not self._queue:
                    await self._wakeup.wait()
                    self._wakeup = anyio.Event()
                job = self._queue.popleft()
                async with self.busy():
                    await run(job)

    def finished(self, job: Job) -> None:
        """A job ended (any outcome): an automatic one stamps the cooldown, failed or not, so a
        broken endpoint is not hammered."""
        if job.trigger == "auto":
            self._auto_queued = False
            self._last_auto_finished = self._clock()

    # ------------------------------------------------------------ triggers

    def schedule(self, job: Job) -> None:
        """Hold `job` until the turn ends."""
        self._scheduled.append(job)
        self.transition()

    def turn_ended(self) -> None:
        """Release cell-scheduled jobs and, every `auto_every` turns, queue an automatic review --
        synchronously, so a status read right after the prompt response already sees it."""
        self._release_scheduled()
        self._turns_since_auto += 1
        if self.auto_every > 0 and self._turns_since_auto >= self.auto_every:
            if self.queue_auto(f"{self._turns_since_auto} assistant turns since the last review"):
                self._turns_since_auto = 0
        if self._queue:
            self._wakeup.set()
        self.transition()

    def turn_failed(self) -> None:
        """The turn ended with an error: still run what its cells asked for."""
        self._release_scheduled()
        if self._queue:
            self._wakeup.set()
        self.transition()

    def _release_scheduled(self) -> None:
        released, self._scheduled = self._scheduled, []
        self._queue.extend(released)

    def _cooling_down(self) -> bool:
        if self._last_auto_finished is None:
            return False
        return self._clock() - self._last_auto_finished < self.cooldown_seconds

    def queue_auto(self, note: str) -> bool:
        """Queue an automatic review unless one is queued, cooling down, or turned off."""
        # `auto_refine_every = 0` turns automatic reviews off entirely: after a compaction and at
        # autonomous checkpoints too, not only the every-K-turns one.
        if self.auto_every <= 0 or self._auto_queued or self._cooling_down() or not self._can_auto():
            return False
        self._auto_queued = True
        self._queue.append(Job("auto", "local", None, gate=True, note=note))
        self._wakeup.set()
        return True
