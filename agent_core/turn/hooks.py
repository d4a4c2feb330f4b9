"""The refinement seam's type: what the session needs of the refinement attached to it.

A session tells its features how each turn went on its bus (agent_core.bus): `TurnFinished` after
every turn that ended, `TurnFailed` when a turn raised instead (a model failure), so anything waiting
for the end of the turn is still released. The refinement attached to a session
(`Session.refinement`) is a `RefinementHook`: setting it subscribes its `turn_failed` to `TurnFailed`,
so the session calls no refinement by name.

`RefinementHook` asks only for what `SessionRefinement` (agent_core.refinement.attach) offers, so a
test can attach any object with a `turn_failed` instead.
"""

from __future__ import annotations

from typing import Protocol


class RefinementHook(Protocol):
    """What the session needs of the refinement attached to it."""

    def turn_failed(self) -> None:
        """The turn raised (no `TurnFinished`): release what its cells scheduled anyway."""
        ...
