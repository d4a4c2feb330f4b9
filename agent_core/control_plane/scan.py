"""A cheap picture of a directory tree: per file its size, mtime and inode, from one `scandir` walk.

What a cell changed under `.continual-acp/` is found by comparing two scans; only the files whose
stat moved are read (and compared by content), so a check of 1,000 files costs one walk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FileStat", "Scan", "file_stat", "moved", "scan"]

# Written and removed by the store while it holds its lock, never read as content: a cell writing
# one changes nothing anybody uses.
IGNORED_NAMES = frozenset({".lock"})
IGNORED_SUFFIX = ".tmp"


# (size, mtime_ns, inode, mode): a plain tuple, because a check builds one per file per cell.
FileStat = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Scan:
    """Files (relative path -> stat) and directories (relative paths) beneath one root."""

    files: dict[str, FileStat]
    dirs: frozenset[str]


def file_stat(info: os.stat_result) -> FileStat:
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_mode)


def scan(root: Path) -> Scan:
    """Walk `root` (symlinks are entries, never followed); an absent root is an empty scan."""
    files: dict[str, FileStat] = {}
    dirs: list[str] = []
    base = str(root)
    cut = len(base) + 1
    stack = [base]
    ignored = IGNORED_NAMES
    while stack:
        current = stack.pop()
        try:
            it = os.scandir(current)
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        path = entry.path
                        stack.append(path)
                        dirs.append(path[cut:])
                        continue
                    name = entry.name
                    if name in ignored or (name[0] == "." and name.endswith(IGNORED_SUFFIX)):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                files[entry.path[cut:]] = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_mode)
    return Scan(files, frozenset(dirs))


def moved(before: Scan, after: Scan) -> list[str]:
    """The relative paths whose stat differs (created, removed or touched), sorted."""
    if before.files == after.files:
        return []
    keys = before.files.keys() | after.files.keys()
    return sorted(k for k in keys if before.files.get(k) != after.files.get(k))
