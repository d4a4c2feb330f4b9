"""The referee's settings from config.toml: `protected_paths` and `test_patterns`.

* `protected_paths = ["tests", "conftest.py"]`: paths (relative to the workspace, or absolute; not
  globs) a cell must not change. Read-only in the sandbox tiers; on other backends a change to one
  during an autonomous loop stops the loop and asks instead of accepting the gates' pass.
* `protect_runner_files = true` (the default): files that change what a gate's runner runs
  (`DEFAULT_RUNNER_FILES`: `conftest.py`, `pytest.ini`, `pyproject.toml`, `sitecustomize.py`, `*.pth`,
  `pytest.py`, ..., and a module named like the gate's `-m` module) count as protected paths during an
  autonomous loop; `false` turns that list off (`protected_paths` still applies).
* `test_patterns = [...]`: what looks like a test or CI config, for the tamper evidence of a pass
  (`fnmatch` patterns over paths relative to the workspace; `**` matches across folders).

`control_plane_outside_changes = "hold" | "accept"` (read by the session for its guard, guard.py):
whether a change to `.continual-acp/` found at a prompt's start is held for review or accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_core.config.referee_defaults import DEFAULT_RUNNER_FILES, DEFAULT_TEST_PATTERNS

__all__ = ["DEFAULT_RUNNER_FILES", "DEFAULT_TEST_PATTERNS", "RefereeSettings"]


@dataclass(frozen=True)
class RefereeSettings:
    protected_paths: tuple[str, ...] = ()
    test_patterns: tuple[str, ...] = DEFAULT_TEST_PATTERNS
    protect_runner_files: bool = True
    errors: tuple[str, ...] = field(default=())

    @property
    def runner_files(self) -> tuple[str, ...]:
        """The patterns that count as protected besides `protected_paths` (none when turned off)."""
        return DEFAULT_RUNNER_FILES if self.protect_runner_files else ()

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
        try:
            runner_files = bool(value(extra, "protect_runner_files"))
        except ValueError as exc:
            errors.append(str(exc))
            runner_files = True
        return cls(
            protected_paths=found.get("protected_paths", ()),
            test_patterns=found.get("test_patterns", DEFAULT_TEST_PATTERNS),
            protect_runner_files=runner_files,
            errors=tuple(errors),
        )
