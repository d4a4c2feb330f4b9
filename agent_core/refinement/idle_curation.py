"""The curator's opt-in idle run: once the session has been idle and quiescent for
`curate_when_idle_seconds` (0, the default, is off), the deterministic pass runs over the local
and global stores.

It goes through the review policy like any refinement: it applies (trigger `auto`, one refinement
per store, `/undo` takes it back) only where the policy lets a refinement of that scope apply
without review; elsewhere it keeps its dry-run report (`reports`) for `/curate` to repeat and a
person to apply. A running pass is inside the service's in-flight bracket (curation.py), so the
editor's quiescence covers it; a turn that starts meanwhile finds the pass finished first or
not started (the timer is re-armed after every turn and skipped while a turn runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness_store import KINDS

if TYPE_CHECKING:
    from agent_core.refinement.records import Scope
    from agent_core.refinement.surface import HarnessSurface

log = logging.getLogger(__name__)

IDLE_SCOPES: tuple[Scope, ...] = ("local", "global")


class IdleCuration:
    """Arms a timer at the end of each turn; when it fires on an idle, quiescent session, runs the pass."""

    def __init__(
        self,
        surface: HarnessSurface,
        *,
        home: Path,
        seconds: float,
        turn_running: Callable[[], bool],
        applies: Callable[[Scope], bool],
    ) -> None:
        self.surface = surface
        self.home = home
        self.seconds = seconds
        self.turn_running = turn_running
        self.applies = applies
        self.reports: dict[str, str] = {}  # scope -> the last idle pass's report
        self.runs = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The armed timer (and the pass it runs), if any."""
        return self._task

    def arm(self) -> None:
        """(Re)start the idle timer: called when a turn ends."""
        self.cancel()
        self._task = asyncio.get_running_loop().create_task(self._after_idle(), name="idle-curation")

    def cancel(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _after_idle(self) -> None:
        await asyncio.sleep(self.seconds)  # the idle time itself
        if self.turn_running() or not self.surface.quiescence().quiescent:
            return  # not idle: the next turn's end arms the timer again
        await self.run_once()

    async def run_once(self) -> None:
        """One idle pass over each idle scope (applied where the review policy allows)."""
        self.runs += 1
        for scope in IDLE_SCOPES:
            try:
                done = await self.surface.curate(
                    scope, home=self.home, apply=self.applies(scope), trigger="auto"
                )
            except Exception:  # an idle pass must never take the session down
                log.exception("the idle curator pass over the %s harness failed", scope)
                continue
            self.reports[scope] = done.plan.report()


def applies_without_review(
    mode: str, refine_review: str, trusted: set[tuple[str, str]]
) -> Callable[[Scope], bool]:
    """Whether the review policy lets an idle pass over `scope` apply (every kind may be touched)."""
    from agent_core.refinement.policy import needs_review

    def applies(scope: Scope) -> bool:
        return not needs_review(
            scope=scope, mode=mode, refine_review=refine_review, kinds=KINDS, trusted=trusted
        )

    return applies
