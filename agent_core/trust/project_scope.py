"""Finding a session's project store: the repository its cwd belongs to.

A session works in a cwd; its project harness is `<repo>/.continual-acp/harness` of the nearest
enclosing repository — the closest ancestor holding `.git` (a directory, or a file for worktrees
and submodules) or an existing `.continual-acp/harness`. No repository, no project scope: callers
then offer local and global only (and say so).
"""

from __future__ import annotations

import os
from pathlib import Path

from harness_store.project import PROJECT_DIR, ProjectStore


def find_repo(cwd: str | os.PathLike[str]) -> Path | None:
    """The repository root enclosing `cwd`, or None."""
    try:
        current = Path(cwd).expanduser().resolve()
    except OSError:
        return None
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists() or (candidate / PROJECT_DIR).is_dir():
            return candidate
    return None


def project_store(cwd: str | os.PathLike[str]) -> ProjectStore | None:
    """The project store of the repository enclosing `cwd`, or None outside a repository."""
    repo = find_repo(cwd)
    return ProjectStore(repo) if repo is not None else None


def git_repo(cwd: str | os.PathLike[str]) -> Path | None:
    """The closest ancestor of `cwd` (itself included) holding `.git`, or None."""
    try:
        current = Path(cwd).expanduser().resolve()
    except OSError:
        return None
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def session_project_store(cwd: str | os.PathLike[str]) -> ProjectStore | None:
    """A session's project store: only when its cwd is inside a git repository (the harness is
    committed with the code there), else None."""
    repo = git_repo(cwd)
    return ProjectStore(repo) if repo is not None else None
