"""Fixtures for the trust tests: one real skill-check service (scratch kernels) per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_core.skill_check import SkillCheckService

SKILLS = """
import time

def add(x, y=0):
    return x + y

def needs_two(a, b):
    return a * b

def sleepy(seconds):
    time.sleep(seconds)
    return seconds

async def later(x):
    return x * 2

not_callable = 42
"""


@pytest.fixture(scope="module")
def skill_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding `trustskills.py`, a module of small skills (the session's cwd)."""
    base = tmp_path_factory.mktemp("skills")
    (base / "trustskills.py").write_text(SKILLS, encoding="utf-8")
    return base


@pytest.fixture(scope="module")
def service() -> Iterator[SkillCheckService]:
    """A check service with a warm pool of one kernel and a short timeout (the hang test waits it)."""
    svc = SkillCheckService(pool_size=1, timeout=3.0)
    svc.warm()
    yield svc
    svc.close()
