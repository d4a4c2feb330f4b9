"""A session's goal and autonomy state, kept with the session (`sessions/<id>/autonomy.json`).

One goal per session: the objective, an optional token budget and what has been spent on it. Spent
tokens are `input + output + cache_write`; cache reads are excluded because they are the same
context served again from the provider's cache, and counting them would exhaust a budget on
repetition rather than on work. The file also holds the gates added in this session and, per gate,
the workspace fingerprint of its last failure (the spin guard survives a restart).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from agent_core.autonomy.gates import Gate, GateConfigError, parse_gates

__all__ = [
    "STATE_FILE",
    "AutonomyState",
    "AutonomyStateFile",
    "Goal",
    "GoalState",
    "billable_tokens",
    "goal_context_block",
]

log = logging.getLogger(__name__)

STATE_FILE = "autonomy.json"
MAX_OBJECTIVE = 4_000
GoalState = Literal["active", "paused", "complete"]


def billable_tokens(input_tokens: int, output_tokens: int, cache_write_tokens: int) -> int:
    """Tokens a goal's budget counts: cache reads are deliberately not a parameter."""
    return max(0, input_tokens) + max(0, output_tokens) + max(0, cache_write_tokens)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Goal:
    objective: str
    token_budget: int | None = None
    tokens_used: int = 0
    cache_read_tokens: int = 0  # shown to the user beside tokens_used, never counted against the budget
    state: GoalState = "active"
    summary: str | None = None  # what goal.complete() said
    created_at: str = field(default_factory=_now)
    # Told to the model once, on its next turn, then cleared.
    notice: str | None = None

    @property
    def budget_left(self) -> int | None:
        return None if self.token_budget is None else max(0, self.token_budget - self.tokens_used)

    @property
    def budget_exhausted(self) -> bool:
        return self.token_budget is not None and self.tokens_used >= self.token_budget

    def status_line(self) -> str:
        spent = f"{self.tokens_used:,} tokens"
        if self.token_budget is not None:
            spent = f"{self.tokens_used:,} of {self.token_budget:,} tokens ({self.budget_left:,} left)"
        return (
            f"{self.state}: {self.objective} — {spent}; cache reads not counted: {self.cache_read_tokens:,}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "token_budget": self.token_budget,
            "tokens_used": self.tokens_used,
            "cache_read_tokens": self.cache_read_tokens,
            "state": self.state,
            "summary": self.summary,
            "created_at": self.created_at,
            "notice": self.notice,
        }

    @classmethod
    def from_json(cls, data: Any) -> Goal:
        if not isinstance(data, dict) or not isinstance(data.get("objective"), str):
            raise ValueError("goal has no objective")
        state = data.get("state", "active")
        if state not in ("active", "paused", "complete"):
            raise ValueError(f"goal state {state!r} is not active, paused or complete")
        budget = data.get("token_budget")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise ValueError(f"goal token_budget {budget!r} is not a positive integer")
        return cls(
            objective=data["objective"],
            token_budget=budget,
            tokens_used=int(data.get("tokens_used", 0)),
            cache_read_tokens=int(data.get("cache_read_tokens", 0)),
            state=state,
            summary=data.get("summary") if isinstance(data.get("summary"), str) else None,
            created_at=str(data.get("created_at") or _now()),
            notice=data.get("notice") if isinstance(data.get("notice"), str) else None,
        )


def new_goal(objective: str, token_budget: int | None) -> Goal:
    """A validated goal; raises ValueError with a message for the user."""
    if not isinstance(objective, str) or not objective.strip():
        raise ValueError("a goal needs an objective: /goal <what should be true when the work is done>")
    if len(objective) > MAX_OBJECTIVE:
        raise ValueError(f"the objective is {len(objective)} characters; keep it under {MAX_OBJECTIVE}")
    if token_budget is not None and (
        not isinstance(token_budget, int) or isinstance(token_budget, bool) or token_budget < 1
    ):
        raise ValueError(f"the token budget must be a positive whole number of tokens, got {token_budget!r}")
    return Goal(objective=" ".join(objective.split()), token_budget=token_budget)


@dataclass(frozen=True)
class AutonomyState:
    goal: Goal | None = None
    gates: tuple[Gate, ...] = ()  # added in this session (`/autonomous gate add`)
    last_failed: tuple[tuple[str, str], ...] = ()  # (gate command, workspace fingerprint)

    def failed_fingerprint(self, command: str) -> str | None:
        return dict(self.last_failed).get(command)

    def with_failure(self, command: str, fingerprint: str | None) -> AutonomyState:
        failures = {k: v for k, v in self.last_failed if k != command}
        if fingerprint is not None:
            failures[command] = fingerprint
        return replace(self, last_failed=tuple(sorted(failures.items())))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "goal": self.goal.to_json() if self.goal else None,
            "gates": [g.to_json() for g in self.gates],
            "last_failed": [list(item) for item in self.last_failed],
        }

    @classmethod
    def from_json(cls, data: Any, *, where: str) -> AutonomyState:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: not a JSON object")
        goal = Goal.from_json(data["goal"]) if data.get("goal") else None
        try:
            gates = parse_gates(
                [g for g in data.get("gates") or [] if isinstance(g, dict | str)],
                source="session",
                where=where,
            )
        except GateConfigError as exc:
            raise ValueError(str(exc)) from None
        failures = tuple(
            (str(item[0]), str(item[1]))
            for item in data.get("last_failed") or []
            if isinstance(item, list) and len(item) == 2
        )
        return cls(goal=goal, gates=gates, last_failed=failures)


class AutonomyStateFile:
    """Load/save one session's `autonomy.json` (0600, written atomically; never a torn file)."""

    def __init__(self, session_dir: Path) -> None:
        self.path = session_dir / STATE_FILE

    def load(self) -> AutonomyState:
        """The saved state; a damaged file is kept aside and an empty state returned (logged)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return AutonomyState()
        except OSError as exc:
            log.warning("cannot read %s (%s); starting without a goal", self.path, exc)
            return AutonomyState()
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read()
        try:
            return AutonomyState.from_json(json.loads(raw.decode("utf-8")), where=str(self.path))
        except (ValueError, UnicodeDecodeError, KeyError, TypeError) as exc:
            aside = self.path.with_name(f"{STATE_FILE}.damaged")
            log.warning("%s is damaged (%s); kept as %s, starting without a goal", self.path, exc, aside)
            try:
                os.replace(self.path, aside)
            except OSError:
                log.exception("could not move %s aside", self.path)
            return AutonomyState()

    def save(self, state: AutonomyState) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        from host_base.private_files import write_atomic  # off the startup path

        write_atomic(self.path, json.dumps(state.to_json(), ensure_ascii=True, indent=1))


def goal_context_block(goal: Goal | None) -> str | None:
    """The short block the model gets each turn while a goal is active or paused."""
    if goal is None or goal.state == "complete":
        return None
    lines = [f"Objective: {goal.objective}"]
    if goal.token_budget is not None:
        lines.append(
            f"Budget: {goal.tokens_used:,} of {goal.token_budget:,} tokens used, {goal.budget_left:,} left "
            "(input + output + cache writes; cache reads are not counted)."
        )
    else:
        lines.append(f"Spent so far: {goal.tokens_used:,} tokens (no budget set).")
    if goal.state == "paused":
        lines.append("The user paused this goal: work only on what the user asks now.")
    if goal.budget_exhausted:
        lines.append(
            "The token budget is used up: stop starting new work, write down where things stand and what "
            "is left, and call goal.complete(summary) only if the objective is really met."
        )
    if goal.notice:
        lines.append(goal.notice)
    lines.append(
        "When you believe the objective is met, call `goal.complete(summary)` in a cell; in autonomous "
        "mode the configured gates then decide whether it is done."
    )
    return "\n".join(lines)
