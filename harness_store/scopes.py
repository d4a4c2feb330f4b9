"""The prompt's view of three scopes: global, then project, then local (issue 15).

Extends `overview.merge` (global + local): nothing is hidden and nothing overrides silently. A
project id that collides with a global one is keyed `project:<id>`; a local id that collides with
either is keyed `local:<id>`. Without a project state this is exactly `merge`.
"""

from __future__ import annotations

from harness_store.models import KINDS, HarnessEntry, HarnessState
from harness_store.overview import merge

ORDER: tuple[str, ...] = ("global", "project", "local")


def merge_scopes(
    global_state: HarnessState, local_state: HarnessState, project_state: HarnessState | None = None
) -> HarnessState:
    """Global, project and local entries together, colliding ids prefixed with their scope."""
    if project_state is None:
        return merge(global_state, local_state)
    entries: dict[str, dict[str, HarnessEntry]] = {}
    for kind in KINDS:
        merged = dict(global_state.entries.get(kind, {}))
        for key, entry in project_state.entries.get(kind, {}).items():
            merged[f"project:{key}" if key in merged else key] = entry
        taken = {e.id for e in merged.values()} | set(merged)
        for key, entry in local_state.entries.get(kind, {}).items():
            merged[f"local:{key}" if key in taken else key] = entry
        entries[kind] = merged
    tombstones = [*global_state.tombstones, *project_state.tombstones, *local_state.tombstones]
    return HarnessState.build(entries, tombstones)


def unprefixed(key: str) -> tuple[str | None, str]:
    """`project:x` -> ("project", "x"); `local:x` -> ("local", "x"); `x` -> (None, "x")."""
    scope, sep, rest = key.partition(":")
    if sep and scope in ORDER and rest:
        return scope, rest
    return None, key
