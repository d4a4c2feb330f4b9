"""Fixtures for the trust tests: one real skill-check service (scratch kernels) per module."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.trust.skill_check import SkillCheckService
from harness_store.project import ProjectStore

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


def memory(title: str, content: str, action: str = "create", entry_id: str | None = None) -> dict[str, Any]:
    return {"action": action, "kind": "memory", "id": entry_id, "title": title, "content": content}


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=check,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("x\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    return path


def _branch_refines(repo: Path, branch: str, content: str, extra: str) -> None:
    git(repo, "checkout", "-q", "-b", branch, "main")
    store = ProjectStore(repo)
    store.apply({"summary": branch, "edits": [memory("Shared", content, "update", "shared")]}, trigger="user")
    store.apply({"summary": branch, "edits": [memory(extra, f"{branch} only")]}, trigger="user")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", branch)


@pytest.fixture
def diverged(repo: Path) -> Path:
    """main has `shared`; branches alice and bob each update it and add an entry of their own."""
    ProjectStore(repo).apply({"edits": [memory("Shared", "base")]}, trigger="user")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base harness")
    _branch_refines(repo, "alice", "alice's version", "Alice note")
    _branch_refines(repo, "bob", "bob's version", "Bob note")
    git(repo, "checkout", "-q", "alice")
    return repo
