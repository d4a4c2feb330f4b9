"""Limits from the config, and a child's budget capped by what its parent has left."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from agent_core.config.option import ConfigError
from agent_core.subagents.limits import Limits, child_budget
from agent_core.subagents.records import Budget


@dataclass
class _Goal:  # the shape of autonomy's Goal that the budget reads (budget_left, state)
    budget_left: int | None
    state: str = "active"


@dataclass
class _Parent:
    autonomy: object = field(default_factory=lambda: SimpleNamespace(goal=None))


def test_defaults_are_three_running_children_and_depth_two() -> None:
    limits = Limits.from_config(SimpleNamespace(extra={}))
    assert (limits.max_running, limits.max_depth, limits.token_budget, limits.max_seconds) == (
        3,
        2,
        None,
        None,
    )


def test_config_settings_override_the_defaults() -> None:
    config = SimpleNamespace(extra={"subagents_max_running": 5, "subagent_max_seconds": 60})
    limits = Limits.from_config(config)
    assert (limits.max_running, limits.max_depth, limits.max_seconds) == (5, 2, 60.0)


def test_a_bad_limit_is_an_error_naming_the_key_not_a_silent_default() -> None:
    with pytest.raises(ConfigError, match=r"^setting subagents_max_depth = 'zero'"):
        Limits.from_config(SimpleNamespace(extra={"subagents_max_depth": "zero"}))


def test_a_child_inherits_the_remaining_token_budget_of_its_parents_goal() -> None:
    parent = _Parent(SimpleNamespace(goal=_Goal(budget_left=1200)))
    assert child_budget(Limits(token_budget=5000), parent, None) == Budget(tokens=1200, seconds=None)


def test_a_paused_goal_does_not_limit_the_child() -> None:
    parent = _Parent(SimpleNamespace(goal=_Goal(budget_left=10, state="paused")))
    assert child_budget(Limits(token_budget=5000), parent, None).tokens == 5000


def test_a_grandchild_gets_no_more_than_its_parent_child_had() -> None:
    budget = child_budget(Limits(max_seconds=600), _Parent(None), Budget(tokens=300, seconds=20))
    assert budget == Budget(tokens=300, seconds=20)
