"""Installed into each kernel by the setup code: the built-in skills and the user-skill index."""

from __future__ import annotations

import sys
from collections.abc import MutableMapping, Sequence

BUILTIN = ("refine", "harness", "editor", "goal", "mcp", "agents")


def install(namespace: MutableMapping[str, object], roots: Sequence[str]) -> None:
    """Bind `refine`, `harness`, `editor`, `goal`, `mcp`, `agents` and `skills` in the user's namespace."""
    import importlib

    import skills
    from skills.user_skills import discover

    index = discover(roots)
    skills._set_index(index)
    for path in index.python_paths:
        if path not in sys.path:
            sys.path.append(path)  # after the project's own paths: a skill never shadows project code
    for name in BUILTIN:
        namespace[name] = importlib.import_module(f"skills.{name}")
    namespace["skills"] = skills
