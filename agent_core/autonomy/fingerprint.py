"""Workspace fingerprints for the spin guard: has anything changed since a gate last failed?

A gate is not rerun on a workspace that is byte-for-byte what it failed on: the model must edit
something first (a source file, a test, a blocker note). Inside git the fingerprint is what git
already knows cheaply — `status --porcelain`, the diff against HEAD, and the content of untracked
files — so a 10,000-file repository costs what `git status` costs. Outside git it is a bounded walk
of paths, sizes and mtimes. Both ignore what the agent's own bookkeeping or a build tool writes
(`.git`, virtualenvs, `node_modules`, caches, `.continual-acp`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from kernel_bridge.safe_git import run_git

__all__ = ["IGNORED_DIRS", "MAX_WALK_ENTRIES", "workspace_fingerprint"]

IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".continual-acp",
    }
)
# A walk outside git stops after this many entries (a home directory must not take minutes); the
# fingerprint then says it was cut, so two cut walks over the same prefix still compare equal.
MAX_WALK_ENTRIES = 200_000
# Untracked files bigger than this are fingerprinted by size and mtime instead of content.
MAX_HASHED_FILE = 4 * 1024 * 1024
GIT_TIMEOUT = 30.0
_EXCLUDE = ":(exclude).continual-acp"


def workspace_fingerprint(root: str | os.PathLike[str]) -> str:
    """A hex digest that changes when any tracked or untracked file of the workspace changes."""
    path = Path(root)
    # `git status` fails outside a work tree, which is the whole test for "is this git?" (one
    # process spawn fewer than asking `rev-parse` first).
    digest = _git_fingerprint(path)
    if digest is not None:
        return "git:" + digest
    return "walk:" + _walk_fingerprint(path)


def _git(root: Path, *args: str) -> bytes | None:
    # Through kernel_bridge's safe git: a repository-configured program (fsmonitor, a filter)
    # does not run, and whatever git still runs gets no capability, key or descriptor of ours.
    try:
        done = run_git(root, *args, timeout=GIT_TIMEOUT, env={"LC_ALL": "C"})
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _git_fingerprint(root: Path) -> str | None:
    digest = hashlib.sha256()
    # GIT_OPTIONAL_LOCKS=0: a fingerprint must not take index.lock while the user's git runs.
    status = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", ".", _EXCLUDE)
    if status is None:
        return None
    digest.update(b"status\0" + status)
    # Against HEAD when there is one (staged and unstaged alike); a repository without commits has
    # no HEAD, and then the index and the worktree diffs together say the same.
    diff = _git(root, "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff", "--", ".", _EXCLUDE)
    if diff is None:
        diff = (_git(root, "diff", "--cached", "--binary", "--no-color", "--", ".", _EXCLUDE) or b"") + (
            _git(root, "diff", "--binary", "--no-color", "--", ".", _EXCLUDE) or b""
        )
    digest.update(b"diff\0" + diff)
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z", "--", ".", _EXCLUDE) or b""
    for raw in sorted(name for name in untracked.split(b"\0") if name):
        digest.update(b"file\0" + raw + b"\0")
        digest.update(_file_digest(root / os.fsdecode(raw)))
    return digest.hexdigest()


def _file_digest(path: Path) -> bytes:
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            return f"special:{info.st_mode}:{info.st_size}".encode()
        if info.st_size > MAX_HASHED_FILE:
            return f"big:{info.st_size}:{info.st_mtime_ns}".encode()
        from harness_store.safe_read import read_bytes  # checked on the descriptor: no swap between

        return hashlib.sha256(read_bytes(path, limit=MAX_HASHED_FILE)).digest()
    except OSError as exc:
        return f"unreadable:{exc.errno}".encode()


def _walk_fingerprint(root: Path) -> str:
    digest = hashlib.sha256()
    count = 0
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        dirs: list[Path] = []
        for entry in entries:
            if count >= MAX_WALK_ENTRIES:
                digest.update(b"cut\0")
                return digest.hexdigest()
            count += 1
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in IGNORED_DIRS or _is_virtualenv(entry.path):
                        continue
                    dirs.append(Path(entry.path))
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = os.path.relpath(entry.path, root)
            digest.update(f"{rel}\0{info.st_size}\0{info.st_mtime_ns}\0".encode("utf-8", "surrogateescape"))
        stack.extend(reversed(dirs))
    return digest.hexdigest()


def _is_virtualenv(path: str) -> bool:
    return os.path.exists(os.path.join(path, "pyvenv.cfg"))
