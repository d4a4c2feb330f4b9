"""The scope rules every harness question shares: which store holds an id, and the merged state.

A session has two or three stores: its own (local), the global one every session shares, and
(issue 15) the project store of the git repository its cwd is in. These are the
only places that decide which of them holds a refinement and how the two are seen together, so the
coordinator and the `HarnessSurface` answer the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness_store import HarnessState
from harness_store.scopes import merge_scopes

if TYPE_CHECKING:
    from agent_core.refinement.records import Scope
    from harness_store import HarnessStore, RefinementResult


def locate(
    local: HarnessStore, glob: HarnessStore, refinement_id: str, *, project: Any = None
) -> tuple[Scope, RefinementResult] | None:
    """The scope whose history holds `refinement_id` (the session's own first, then the project's,
    then global) and the record; None when none does. Blocking: call it in a worker thread."""
    stores: list[tuple[Scope, Any]] = [("local", local)]
    if project is not None:
        stores.append(("project", project))
    stores.append(("global", glob))
    for scope, store in stores:
        result = store.get_refinement(refinement_id)
        if result is not None:
            return scope, result
    return None


def merged_state(
    local: HarnessState, glob: HarnessState, project: HarnessState | None = None
) -> HarnessState:
    """The stores as the prompt sees them (colliding ids keyed `project:<id>` / `local:<id>`,
    `merge_scopes`), with the tombstones of all (the session's own first)."""
    tombstones = [*local.tombstones, *(project.tombstones if project is not None else []), *glob.tombstones]
    return HarnessState.build(merge_scopes(glob, local, project).entries, tombstones)
