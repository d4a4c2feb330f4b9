"""Scratch checkouts of the session's repository for a replay: `git worktree add --detach` at HEAD.

The task repository's working tree and index are never touched: the checkout goes into a private
temporary directory (0700) beside nothing of the repository's, and only `.git/worktrees/<name>`
records it while it exists. Removal (`git worktree remove --force`, then the directory, then
`git worktree prune`) runs whatever happened inside it. Every git runs through
`kernel_bridge.safe_git` (no hook, filter, fsmonitor or pager the repository names may run).
Blocking: call it off the event loop (`scratch_checkout` does).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio

from kernel_bridge.safe_git import run_git

GIT_TIMEOUT = 120.0


class WorktreeError(RuntimeError):
    """The scratch checkout could not be made; the message says what git answered."""


def _git(repo: Path, *args: str) -> str:
    result = run_git(repo, *args, timeout=GIT_TIMEOUT)
    if result.returncode != 0:
        said = (result.stderr or result.stdout).decode("utf-8", errors="replace").strip()
        raise WorktreeError(f"git {' '.join(args[:2])} failed: {said[-500:] or 'timed out'}")
    return result.stdout.decode("utf-8", errors="replace").strip()


def repository_root(cwd: str | os.PathLike[str]) -> Path | None:
    """The top of the work tree enclosing `cwd` as git itself sees it, or None outside one."""
    try:
        return Path(_git(Path(cwd), "rev-parse", "--show-toplevel"))
    except (WorktreeError, OSError):
        return None


def add(repo: Path) -> Path:
    """A detached checkout of `repo`'s HEAD in a new private temporary directory."""
    parent = Path(tempfile.mkdtemp(prefix="continual-acp-replay-"))  # 0700
    path = parent / "checkout"
    try:
        _git(repo, "worktree", "add", "--detach", "--quiet", str(path), "HEAD")
    except BaseException:
        shutil.rmtree(parent, ignore_errors=True)
        raise
    return path


def remove(repo: Path, path: Path) -> None:
    """Remove the checkout `add` made and git's record of it (never raises: cleanup is best effort,
    and a record left behind is pruned by the next `prune`)."""
    with contextlib.suppress(WorktreeError, OSError):
        _git(repo, "worktree", "remove", "--force", str(path))
    shutil.rmtree(path.parent, ignore_errors=True)
    with contextlib.suppress(WorktreeError, OSError):
        _git(repo, "worktree", "prune")


@contextlib.contextmanager
def checkout(repo: Path) -> Iterator[Path]:
    """`add` then, whatever happens inside, `remove` (blocking)."""
    path = add(repo)
    try:
        yield path
    finally:
        remove(repo, path)


@contextlib.asynccontextmanager
async def scratch_checkout(repo: Path) -> AsyncIterator[Path]:
    """`checkout` with its git runs in worker threads (the event loop never waits on git); removal
    is shielded, so a cancelled replay still leaves no checkout behind."""
    path = await anyio.to_thread.run_sync(add, repo)
    try:
        yield path
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(remove, repo, path)
