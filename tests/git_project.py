"""A small git repository whose one test fails (`calc.add` subtracts), with a pytest gate declared in
`.continual-acp/gates.toml`: the project the autonomy and referee stdio tests run real gates in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
PYTEST_GATE = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV}
    )


def failing_calc_project(tmp_path: Path) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (repo / ".continual-acp").mkdir()
    (repo / ".continual-acp" / "gates.toml").write_text(
        f"[[gate]]\ncommand = {PYTEST_GATE!r}\ntimeout = 120\n"
    )
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "failing test")
    return repo
