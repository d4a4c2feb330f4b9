"""`goal`: persistent session goals -- not available yet.

Goals (one objective per session, continued until `goal.complete()`) arrive with autonomous mode.
Until then every call says so plainly instead of pretending to work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from skills._awaitable import JsonObject

__all__ = ["complete", "set", "status"]

NOT_AVAILABLE = "goals are not available yet in continual-acp; keep working on the user's request directly"


class GoalsNotAvailable(RuntimeError):
    """Raised by every goal call that would change something: goals do not exist yet."""


def status() -> JsonObject:
    """`{"available": False, "message": ...}`: goals are not available yet."""
    return {"available": False, "message": NOT_AVAILABLE}


def set(objective: str, *, token_budget: int | None = None) -> NoReturn:
    """Not available yet: raises `GoalsNotAvailable`."""
    raise GoalsNotAvailable(NOT_AVAILABLE)


def complete(summary: str | None = None) -> NoReturn:
    """Not available yet: raises `GoalsNotAvailable`."""
    raise GoalsNotAvailable(NOT_AVAILABLE)
