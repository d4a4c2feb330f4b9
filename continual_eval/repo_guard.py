"""The task repository as the task prompt left it: what runs after the prompt must not change it.

In an eval, `/refine` follows the task prompt in the same session, and the server checks a skill
the planner writes by running its `examples` in a scratch kernel whose cwd is the session's: the
task repository. A skill whose example releases, builds or commits would then do the task after
the prompt, and the checker would score work the agent never did. `RepoSnapshot.take` copies the
repository before the refinement; `restore` puts back every file that changed since and removes
what was added, and returns the paths, so the checker judges the repository the prompt left.

The repository is data here: only regular files and symlinks are copied (a FIFO or device file is
never opened), symlinks are copied as links, and `.continual-acp/` (the project harness, which a
refinement may legitimately write) is left alone.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

KEEP = ".continual-acp"  # the project harness: a refinement's own place


def _entries(root: Path) -> dict[str, str]:
    """relative path -> kind ("dir", "file", "link") of what is under `root` (other kinds skipped)."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        rel_folder = Path(folder).relative_to(root)
        if rel_folder == Path("."):
            dirs[:] = [d for d in dirs if d != KEEP]
            files = [f for f in files if f != KEEP]
        for name in [*dirs, *files]:
            path = Path(folder) / name
            try:
                mode = path.lstat().st_mode
            except OSError:
                continue
            rel = (rel_folder / name).as_posix()
            if stat.S_ISLNK(mode):
                found[rel] = "link"
            elif stat.S_ISDIR(mode):
                found[rel] = "dir"
            elif stat.S_ISREG(mode):
                found[rel] = "file"
    return found


def _same(a: Path, b: Path, kind: str) -> bool:
    try:
        if kind == "link":
            return b.is_symlink() and os.readlink(a) == os.readlink(b)
        if kind == "dir":
            return b.is_dir() and not b.is_symlink()
        mode = b.lstat().st_mode
        if not stat.S_ISREG(mode) or a.stat().st_size != b.lstat().st_size:
            return False
        with a.open("rb") as x, b.open("rb") as y:
            while True:
                left, right = x.read(1 << 16), y.read(1 << 16)
                if left != right:
                    return False
                if not left:
                    return True
    except OSError:
        return False


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class RepoSnapshot:
    repo: Path
    copy: Path
    entries: dict[str, str]

    @classmethod
    def take(cls, repo: Path) -> RepoSnapshot:
        copy = Path(tempfile.mkdtemp(prefix="continual-eval-snapshot-"))
        entries = _entries(repo)
        for rel, kind in sorted(entries.items()):
            source, target = repo / rel, copy / rel
            if kind == "dir":
                target.mkdir(parents=True, exist_ok=True)
            elif kind == "link":
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(os.readlink(source), target)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target, follow_symlinks=False)
        return cls(repo, copy, entries)

    def restore(self) -> list[str]:
        """Put the repository back as it was at `take`; the paths that had changed, sorted.

        The copy is discarded afterwards."""
        changed: set[str] = set()
        try:
            now = _entries(self.repo)
            # What was added (or replaced by another kind) goes first, deepest paths first.
            for rel in sorted(now, key=lambda r: r.count("/"), reverse=True):
                kind = self.entries.get(rel)
                if kind is None or kind != now[rel]:
                    _remove(self.repo / rel)
                    changed.add(rel)
            for rel, kind in sorted(self.entries.items()):
                source, target = self.copy / rel, self.repo / rel
                if _same(source, target, kind):
                    continue
                changed.add(rel)
                if kind == "dir":
                    if target.is_symlink() or target.exists():
                        _remove(target)
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if target.is_symlink() or target.exists():
                    _remove(target)
                target.parent.mkdir(parents=True, exist_ok=True)
                if kind == "link":
                    os.symlink(os.readlink(source), target)
                else:
                    shutil.copy2(source, target, follow_symlinks=False)
        finally:
            shutil.rmtree(self.copy, ignore_errors=True)
        return sorted(changed)
