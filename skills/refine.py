"""`refine`: ask for a refinement of the continual harness from a cell.

    await refine.run()                                  # local, applied when this turn ends
    await refine.run("remember the test command", global_=True)
    refine.status()                                     # {"pending", "in_flight", "last"}

The refinement is scheduled, not run in the cell: it plans from the whole turn once the turn ends,
then applies (or waits for the user's review, per the session's review policy).
"""

from __future__ import annotations

from kernel_bridge import hostclient as bridge
from skills._awaitable import Answer

__all__ = ["run", "status"]


def run(instructions: str | None = None, global_: bool = False) -> Answer:
    """Schedule a refinement (local by default; `global_=True` for the cross-session store)."""
    if instructions is not None and not isinstance(instructions, str):
        raise TypeError("instructions must be a string or None")
    scope = "global" if global_ else "local"
    return Answer(bridge.call("refine.run", instructions=instructions, scope=scope))


def status() -> dict[str, object]:
    """Refinement work of this session: how many are pending, running, and the last outcome."""
    return dict(bridge.call("refine.status"))
