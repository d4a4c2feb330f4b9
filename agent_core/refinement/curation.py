"""The curator in a session: a dry run of the deterministic pass over one store, and applying it.

The pass itself is harness_store's (`curator.py`); this module feeds it the entries' standing from
their counters (agent_core/trust/entry_counters.py) and runs it the way every harness write runs:
off the event loop, inside the service's in-flight bracket (so the editor's quiescence covers a
running pass), reported as a refinement card, and only through the review policy:

* `/curate` and `continual-acp harness curate` are dry runs; `apply` is a person's explicit
  decision (the review), like `/promote`;
* the idle run (`curate_when_idle_seconds`, off by default) applies only where the review policy
  lets a refinement of that scope apply without review, and otherwise leaves its dry-run report.

With `curate_model_pass` on, a `CuratorModel` (curation_model.py) adds the model's merges after the
deterministic pass, under the same rules, in the same report and the same history record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from harness_store import HarnessEntry, HarnessState, RefinementResult
from harness_store.curator import CurationPlan, plan_curation, restore_plan

if TYPE_CHECKING:
    from agent_core.refinement.curation_model import CuratorModel
    from agent_core.refinement.records import Scope, Trigger
    from agent_core.refinement.service import HarnessService


@dataclass(frozen=True)
class Curation:
    """A pass: its dry-run plan, and the history record when it was applied."""

    scope: Scope
    plan: CurationPlan
    result: RefinementResult | None = None


def standing_from(home: Path) -> dict[str, str]:
    """Entry key -> standing, from the data dir's counters (read once per pass)."""
    from agent_core.trust.entry_counters import home_counters

    return {key: counters.standing for key, counters in home_counters(home).items()}


def standing_factory(home: Path) -> Callable[[HarnessEntry], str]:
    """`continual-acp harness curate`'s standing: the data dir's counters, read once."""
    return _standing_of(standing_from(home))


def _standing_of(standings: dict[str, str]) -> Callable[[HarnessEntry], str]:
    def standing(entry: HarnessEntry) -> str:
        scoped = standings.get(f"{entry.scope}:{entry.id}") if entry.scope in ("local", "project") else None
        return scoped or standings.get(entry.id) or "neutral"

    return standing


async def curate(
    service: HarnessService,
    scope: Scope,
    *,
    home: Path,
    apply: bool,
    trigger: Trigger = "user",
    model: CuratorModel | None = None,
) -> Curation:
    """Plan the pass over `scope`'s store (with `model`, its merges added after the deterministic
    pass); with `apply`, write it (one history record) and report it."""
    store = service.scopes.store(scope)

    def plan() -> tuple[HarnessState, CurationPlan]:
        standing = _standing_of(standing_from(home))
        state = store.load()
        return state, plan_curation(state, standing=standing)

    async with service.jobs.busy():  # the editor's quiescence covers the whole pass
        state, planned = await anyio.to_thread.run_sync(plan)
        if model is not None:
            planned = await model.extend(scope, state, planned, apply=apply)
        if not apply or not planned.actions:
            return Curation(scope, planned)
        result = await anyio.to_thread.run_sync(
            lambda: store.curate(planned, trigger=trigger, session_id=service.session_id)
        )
        service.report(result, trigger)
        return Curation(scope, planned, result)


async def restore(service: HarnessService, scope: Scope, kind: str, entry_id: str) -> RefinementResult | None:
    """Bring one archived entry back (None when it is not archived)."""
    store = service.scopes.store(scope)
    async with service.jobs.busy():
        planned = await anyio.to_thread.run_sync(lambda: restore_plan(store.load(), kind, entry_id))
        if not planned.actions:
            return None
        result = await anyio.to_thread.run_sync(lambda: store.curate(planned, session_id=service.session_id))
        service.report(result, "user")
        return result
