"""Fixtures for autonomous mode: real git repositories and real gate processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from autonomy_helpers import git


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one committed file."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "app.py").write_text("VALUE = 1\n")
    git(root, "add", "app.py")
    git(root, "commit", "-q", "-m", "initial")
    return root
