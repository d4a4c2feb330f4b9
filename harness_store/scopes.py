"""The three scopes of a session's harness, held once: `Scopes(local, global, project|None)`.

Which store holds a refinement (`locate`), how the stores are seen together (`merged`, and
`merge_scopes` for the prompt), and the order they are asked in (`each`: the session's own first,
then the project's, then global) are decided here, so no caller writes its own scope loop.

`merge_scopes` extends `overview.merge` (global + local): nothing is hidden and nothing overrides
silently. A project id that collides with a global one is keyed `project:<id>`; a local id that
collides with either is keyed `local:<id>`. Without a project state this is exactly `merge`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from harness_store.errors import HarnessStoreError
from harness_store.models import KINDS, HarnessEntry, HarnessState, RefinementResult
from harness_store.overview import merge
from harness_store.project import ProjectStore
from harness_store.store import HarnessStore, Store

ScopeName = Literal["local", "global", "project"]

ORDER: tuple[str, ...] = ("global", "project", "local")

NO_PROJECT = "this session has no project harness (its cwd is not in a git repository)"


def merge_scopes(
    global_state: HarnessState, local_state: HarnessState, project_state: HarnessState | None = None
) -> HarnessState:
    """Global, project and local entries together, colliding ids prefixed with their scope."""
    if project_state is None:
        return merge(global_state, local_state)
    entries = {kind: _merge_kind(*_sources(kind, global_state, local_state, project_state)) for kind in KINDS}
    tombstones = [*global_state.tombstones, *project_state.tombstones, *local_state.tombstones]
    return HarnessState.build(entries, tombstones)


_Items = dict[str, HarnessEntry]
_NONE: _Items = {}


def _sources(
    kind: str, global_state: HarnessState, local_state: HarnessState, project_state: HarnessState | None
) -> tuple[_Items, _Items | None, _Items]:
    # Any empty dict stands for any other (an empty store's state is read afresh each time).
    project = (project_state.entries.get(kind) or _NONE) if project_state is not None else None
    return global_state.entries.get(kind) or _NONE, project, local_state.entries.get(kind) or _NONE


def _merge_kind(global_items: _Items, project_items: _Items | None, local_items: _Items) -> _Items:
    """One kind's entries of the three scopes, colliding ids prefixed (see `merge_scopes`)."""
    merged = dict(global_items)
    if project_items is None:  # two scopes: exactly `overview.merge`
        for key, entry in local_items.items():
            merged[f"local:{key}" if key in merged else key] = entry
        return merged
    for key, entry in project_items.items():
        merged[f"project:{key}" if key in merged else key] = entry
    taken = {e.id for e in merged.values()} | set(merged)
    for key, entry in local_items.items():
        merged[f"local:{key}" if key in taken else key] = entry
    return merged


# Recent prompt views by the identity of their source states (which they hold, so ids stay unique).
_VIEWS: dict[tuple[int, ...], tuple[tuple[HarnessState | None, ...], HarnessState]] = {}
# Recent merged kinds by the identity of their three source dicts (held, as above). A write changes
# the dicts of the kinds it touched only (copy-on-write), so after it the other kinds' merged dicts,
# and the word indexes built for them, are reused.
_KINDS: dict[tuple[int, ...], tuple[tuple[_Items | None, ...], _Items]] = {}


def _empty(state: HarnessState | None) -> bool:
    return state is None or (not state.tombstones and not any(state.entries.values()))


@dataclass(frozen=True)
class ScopeStates:
    """The three scopes' states read at one moment (`Scopes.states`)."""

    local: HarnessState
    global_: HarnessState
    project: HarnessState | None = None

    def merged(self) -> HarnessState:
        """The states as the prompt sees them (`merge_scopes`), with the tombstones of all, the
        session's own first."""
        project = self.project
        tombstones = [
            *self.local.tombstones,
            *(project.tombstones if project is not None else []),
            *self.global_.tombstones,
        ]
        return HarnessState.build(self._merged_view().entries, tombstones)

    def prompt_view(self) -> HarnessState:
        """The prompt's view: `merge_scopes(global, local, project)` (tombstones global first).

        The same view object while no store changed (stores hand out their cached state until the
        file changes), so the overview's word index built for it is reused by the next prompt."""
        # An empty scope (a session's local store before its first entry) is read afresh each time:
        # any empty state stands for any other.
        sources = tuple(
            None if _empty(state) else state for state in (self.global_, self.local, self.project)
        )
        ident = tuple(id(state) for state in sources)
        hit = _VIEWS.get(ident)
        if hit is not None and all(a is b for a, b in zip(hit[0], sources, strict=True)):
            return hit[1]
        view = self._merged_view()
        if len(_VIEWS) >= 8:
            _VIEWS.pop(next(iter(_VIEWS)))
        _VIEWS[ident] = (sources, view)
        return view

    def _merged_view(self) -> HarnessState:
        """`merge_scopes(global, local, project)`, each kind's dict reused while its sources are."""
        entries: dict[str, _Items] = {}
        for kind in KINDS:
            sources = _sources(kind, self.global_, self.local, self.project)
            ident = tuple(id(items) for items in sources)
            hit = _KINDS.get(ident)
            if hit is not None and all(a is b for a, b in zip(hit[0], sources, strict=True)):
                entries[kind] = hit[1]
                _KINDS[ident] = _KINDS.pop(ident)  # least recently used goes first
                continue
            entries[kind] = _merge_kind(*sources)
            if len(_KINDS) >= 32:
                _KINDS.pop(next(iter(_KINDS)))
            _KINDS[ident] = (sources, entries[kind])
        project = self.project
        tombstones = [
            *self.global_.tombstones,
            *(project.tombstones if project else []),
            *self.local.tombstones,
        ]
        return HarnessState.build(entries, tombstones)


@dataclass(frozen=True)
class Scopes:
    """A session's stores: its own (`local`), the one every session shares (`global_`, `global` on
    the wire) and the project store of the git repository its cwd is in (None outside one).

    Every method reads files: call them in a worker thread from async code.
    """

    local: HarnessStore
    global_: HarnessStore
    project: ProjectStore | None = None

    def each(self) -> Iterator[tuple[ScopeName, Store]]:
        """(scope, store), narrowest first: local, project (if any), global."""
        yield "local", self.local
        if self.project is not None:
            yield "project", self.project
        yield "global", self.global_

    def store(self, scope: ScopeName) -> Store:
        """The store of one scope; `HarnessStoreError` for `project` without a project harness."""
        if scope == "project":
            if self.project is None:
                raise HarnessStoreError(NO_PROJECT)
            return self.project
        return self.global_ if scope == "global" else self.local

    def locate(self, refinement_id: str) -> tuple[ScopeName, RefinementResult] | None:
        """The scope whose history holds `refinement_id` (asked in `each` order) and the record;
        None when none does."""
        for scope, store in self.each():
            result = store.get_refinement(refinement_id)
            if result is not None:
                return scope, result
        return None

    def states(self) -> ScopeStates:
        """Each scope's current state."""
        project = self.project.load() if self.project is not None else None
        return ScopeStates(self.local.load(), self.global_.load(), project)

    def merged(self) -> HarnessState:
        """The stores as the prompt sees them, with the tombstones of all (`ScopeStates.merged`)."""
        return self.states().merged()
