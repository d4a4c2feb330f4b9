"""The checks of the rows of kind `custom` in config/table.py: each returns the normalized value or
raises ValueError (its text is added to the error when it says more than the value)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def verify_skills_value(value: Any) -> Any:
    """`verify_skills`: a bool, or a table of scope (local, project, global) -> bool."""
    if isinstance(value, bool):
        return value
    if isinstance(value, Mapping) and all(
        scope in ("local", "project", "global") and isinstance(flag, bool) for scope, flag in value.items()
    ):
        return dict(value)
    raise ValueError(value)


def gates_value(value: Any) -> Any:
    """`gates`: the user's gates, as autonomous mode parses them."""
    from agent_core.autonomy.gates import parse_gates

    parse_gates(value, source="user", where="config.toml")  # raises GateConfigError (a ValueError)
    return value
