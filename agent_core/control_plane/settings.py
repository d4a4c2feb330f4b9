"""The referee's settings from config.toml: `protected_paths` and `test_patterns`.

* `protected_paths = ["tests", "conftest.py"]`: paths (relative to the workspace, or absolute; not
  globs) a cell must not change. Read-only in the sandbox tiers; on other backends a change to one
  during an autonomous loop stops the loop and asks instead of accepting the gates' pass.
* `test_patterns = [...]`: what looks like a test or CI config, for the tamper evidence of a pass
  (`fnmatch` patterns over paths relative to the workspace; `**` matches across folders).

`control_plane_outside_changes = "hold" | "accept"` (read by the session for its guard, guard.py):
whether a change to `.continual-acp/` found at a prompt's start is held for review or accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_core.config.table import DEFAULT_TEST_PATTERNS

__all__ = ["DEFAULT_TEST_PATTERNS", "RefereeSettings"]


@dataclass(frozen=True)
class RefereeSettings:
    protected_paths: tuple[str, ...] = ()
    test_patterns: tuple[str, ...] = DEFAULT_TEST_PATTERNS
    errors: tuple[str, ...] = field(default=())

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any]) -> RefereeSettings:
        """From `AgentConfig.extra` (checked by `load_config`; a bad value here is an error entry)."""
        from agent_core.config.table import value

        errors: list[str] = []
        found: dict[str, tuple[str, ...]] = {}
        for key in ("protected_paths", "test_patterns"):
            try:
                found[key] = tuple(value(extra, key))
            except ValueError as exc:
                errors.append(str(exc))
        return cls(
            protected_paths=found.get("protected_paths", ()),
            test_patterns=found.get("test_patterns", DEFAULT_TEST_PATTERNS),
            errors=tuple(errors),
        )
