"""The session's hook types: what it calls, typed, so nothing outside is reached through `Any`.

A session tells its hooks how each turn went: `after_turn_hooks` (session.py) run after every turn
that ended; `turn_failed_hooks` run when a turn raised instead (a model failure), when no after-turn
hook ran, so anything waiting for the end of the turn is still released. The refinement attached to
a session (`Session.refinement`) is a `RefinementHook`: setting it registers its `turn_failed` as a
turn-failure hook, so the session calls no refinement by name.

`RefinementHook` asks only for what both `SessionRefinement` (agent_core.refinement.attach) and
`RefinementCoordinator` offer today, so either can be attached without a change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

# A turn raised: no after-turn hook ran for it.
TurnFailedHook = Callable[[], None]


class RefinementHook(Protocol):
    """What the session needs of the refinement attached to it."""

    def turn_failed(self) -> None:
        """The turn raised (no after-turn hook ran): release what its cells scheduled anyway."""
        ...
