"""Server-wide subagent limits and each child's budget.

Settings (config.toml, snake_case; no env var needed): `subagents_max_running` (children running at
once in this server, default 3; more are queued), `subagents_max_depth` (default 2: a child may
spawn, a grandchild may not), `subagent_token_budget` and `subagent_max_seconds` (per child; default
none). A parent with a goal (`session.autonomy.goal`, when autonomous mode is attached) passes its
remaining token budget down: a child never gets more than its parent has left.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_core.subagents.records import Budget

if TYPE_CHECKING:
    from agent_core.subagents.session_port import SubagentSession

log = logging.getLogger(__name__)

DEFAULT_MAX_RUNNING = 3
DEFAULT_MAX_DEPTH = 2


@dataclass(frozen=True)
class Limits:
    """How many children may run, how deep they nest, their token and time budgets."""

    max_running: int = DEFAULT_MAX_RUNNING
    max_depth: int = DEFAULT_MAX_DEPTH
    token_budget: int | None = None
    max_seconds: float | None = None

    @classmethod
    def from_config(cls, config: Any) -> Limits:
        """The limits from config.toml (checked against `config_table`; a bad value raises
        `ConfigError` naming the key, as `load_config` already did at start)."""
        from agent_core.config.table import value

        extra = getattr(config, "extra", {}) or {}
        return cls(
            max_running=value(extra, "subagents_max_running"),
            max_depth=value(extra, "subagents_max_depth"),
            token_budget=value(extra, "subagent_token_budget"),
            max_seconds=value(extra, "subagent_max_seconds"),
        )


def child_budget(limits: Limits, parent: SubagentSession, parent_budget: Budget | None) -> Budget:
    """The budget of a new child of `parent`: the configured one, capped by what the parent has left.

    "Left" is the parent's goal budget when it has an active goal (the goal lives on
    `session.autonomy`, which may not be attached), and the parent's own child budget when the
    parent is itself a child.
    """
    tokens = limits.token_budget
    seconds = limits.max_seconds
    goal = parent.autonomy.goal if parent.autonomy is not None else None
    if goal is not None and goal.state == "active" and goal.budget_left is not None:
        tokens = goal.budget_left if tokens is None else min(tokens, goal.budget_left)
    if parent_budget is not None:
        if parent_budget.tokens is not None:
            tokens = parent_budget.tokens if tokens is None else min(tokens, parent_budget.tokens)
        if parent_budget.seconds is not None:
            seconds = parent_budget.seconds if seconds is None else min(seconds, parent_budget.seconds)
    return Budget(tokens=tokens, seconds=seconds)
