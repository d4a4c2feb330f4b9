"""The two-scope rules every harness question shares: which store holds an id, and the merged state.

A session has two stores: its own (local) and the global one every session shares. These are the
only places that decide which of them holds a refinement and how the two are seen together, so the
coordinator and the `HarnessSurface` answer the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_store import HarnessState, merge

if TYPE_CHECKING:
    from agent_core.refinement.records import Scope
    from harness_store import HarnessStore, RefinementResult


def locate(
    local: HarnessStore, glob: HarnessStore, refinement_id: str
) -> tuple[Scope, RefinementResult] | None:
    """The scope whose history holds `refinement_id` (the session's own first) and the record;
    None when neither does. Blocking: call it in a worker thread."""
    for scope, store in (("local", local), ("global", glob)):
        result = store.get_refinement(refinement_id)
        if result is not None:
            return ("global" if scope == "global" else "local"), result
    return None


def merged_state(local: HarnessState, glob: HarnessState) -> HarnessState:
    """Both stores as the prompt sees them (a local id colliding with a global one is keyed
    `local:<id>`), with the tombstones of both (the session's own first)."""
    return HarnessState.build(merge(glob, local).entries, [*local.tombstones, *glob.tombstones])
