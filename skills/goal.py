"""`goal`: the session's persistent goal, from a cell.

    goal.set("all tests pass on Python 3.12", token_budget=200_000)
    goal.status()            # {"available", "goal": {...} or None, "mode"}
    goal.complete("fixed the import cycle; pytest is green")

One goal per session; it survives restarts and reloads. `complete()` in autonomous mode is a
candidate, not a verdict: the configured gates run when the turn ends and decide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_bridge import hostclient as bridge
from skills._awaitable import Answer

if TYPE_CHECKING:
    from skills._awaitable import JsonObject

__all__ = ["complete", "set", "status"]


def set(objective: str, token_budget: int | None = None) -> Answer:
    """Set or replace the session's goal (token_budget counts input + output + cache writes)."""
    if not isinstance(objective, str) or not objective.strip():
        raise ValueError("goal.set needs a non-empty objective string")
    if token_budget is not None and (not isinstance(token_budget, int) or isinstance(token_budget, bool)):
        raise TypeError("token_budget must be an int or None")
    return Answer(bridge.call("goal.set", objective=objective, token_budget=token_budget))


def status() -> JsonObject:
    """The goal (objective, state, tokens used and budget) or None, and the session's mode."""
    return dict(bridge.call("goal.status"))


def complete(summary: str | None = None) -> Answer:
    """Say the objective is met (in autonomous mode the gates decide when the turn ends)."""
    if summary is not None and not isinstance(summary, str):
        raise TypeError("summary must be a string or None")
    return Answer(bridge.call("goal.complete", summary=summary))
