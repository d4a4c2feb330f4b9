"""skills: code that runs inside the kernel and talks to the host through the host bridge.

In a cell, `skills` is also the user-skill library: `skills.list()` names the Agent Skills found
for this session and `skills.read(name)` returns one skill's full SKILL.md. The index is installed
by the kernel setup code (see `skills.loader`).
"""

from __future__ import annotations

import builtins
from typing import NoReturn

from skills.user_skills import SkillIndex, read_skill_text

_index = SkillIndex()


def _set_index(index: SkillIndex) -> None:
    global _index
    _index = index


def list() -> builtins.list[dict[str, str]]:
    """The user skills of this session: name, description and the SKILL.md path."""
    return [skill.to_json() for skill in _index.skills]


def read(name: str) -> str:
    """The full instructions (SKILL.md) of skill `name`."""
    return read_skill_text(_index, name)


def problems() -> builtins.list[str]:
    """Skill folders that were found but could not be used, with the reason."""
    return builtins.list(_index.problems)


def __dir__() -> builtins.list[str]:
    return ["list", "problems", "read"]


def __getattr__(name: str) -> NoReturn:
    raise AttributeError(f"module 'skills' has no attribute {name!r}; use skills.list() or skills.read(name)")
