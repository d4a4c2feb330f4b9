"""`Quiescence`: the one settled rule of a session's harness and its inputs.

Settled = refinement idle (nothing queued, held or running, as published) and no child of the
session still queued or running, as the subagent hub reports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core.refinement.records import QuiescenceChanged


@dataclass(frozen=True)
class Quiescence:
    """The settled rule's inputs and answer: refinement idle and no child still working."""

    refinement_idle: bool
    pending: int
    in_flight: int
    children: int
    last_refinement_id: str | None

    @property
    def quiescent(self) -> bool:
        return self.refinement_idle and self.children == 0

    @classmethod
    def at(cls, event: QuiescenceChanged, *, children: int) -> Quiescence:
        """The rule applied to a published transition (its counts as they were then)."""
        return cls(event.quiescent, event.pending, event.in_flight, children, event.last_refinement_id)


def no_children() -> int:
    return 0


__all__ = ["Quiescence", "no_children"]
