"""One `scandir` walk of a directory tree: its files (with their stat) and its directories.

The guard never takes a stat for evidence that a file is unchanged (a cell can set the mtime back,
and rewrite a file in place keeping its inode): the walk says which files and directories there
are, and each file's link count (a second hard link lets a write elsewhere change it silently).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["IGNORED_NAMES", "IGNORED_SUFFIX", "FileStat", "Scan", "scan"]

# Written and removed by the store while it holds its lock, never read as content: a cell writing
# one changes nothing anybody uses.
IGNORED_NAMES = frozenset({".lock"})
IGNORED_SUFFIX = ".tmp"


# (size, mtime_ns, ctime_ns, inode, link count, mode): a plain tuple, one per file per walk.
FileStat = tuple[int, int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class Scan:
    """Files (relative path -> stat) and directories (relative paths) beneath one root."""

    files: dict[str, FileStat]
    dirs: frozenset[str]


def scan(root: Path, before_listing: Callable[[str], object] | None = None) -> Scan:
    """Walk `root` (symlinks are entries, never followed); an absent root is an empty scan.

    `before_listing(path)` is called for each directory (the root first) before it is listed: a
    watch placed there sees whatever is created in it after the listing began."""
    files: dict[str, FileStat] = {}
    dirs: list[str] = []
    base = str(root)
    cut = len(base) + 1
    stack = [base]
    ignored = IGNORED_NAMES
    while stack:
        current = stack.pop()
        if before_listing is not None:
            before_listing(current)
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
                files[entry.path[cut:]] = (
                    info.st_size,
                    info.st_mtime_ns,
                    info.st_ctime_ns,
                    info.st_ino,
                    info.st_nlink,
                    info.st_mode,
                )
    return Scan(files, frozenset(dirs))
