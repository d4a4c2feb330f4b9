"""Directory modes a cell took away, given back to their owner so the guard can compare and restore:
a directory of the tree its owner cannot list (the files in it must not escape the comparison), and
the directories above a file to restore made writable again (a cell made one read-only so that
what it wrote there could not be removed). Only the owner's own directories; never a symlink.
"""

from __future__ import annotations

import contextlib
import os
import stat


def make_listable(directory: str) -> None:
    """A directory of the tree its owner cannot list (a cell's chmod: the files in it must not
    escape the comparison) is made listable again."""
    with contextlib.suppress(OSError):
        info = os.lstat(directory)
        if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o500 != 0o500 and info.st_uid == os.geteuid():
            os.chmod(directory, stat.S_IMODE(info.st_mode) | 0o500)


def open_up(target: str, rel_dir: str) -> None:
    """Make the directories from the tree's top down to `rel_dir` writable and searchable by their
    owner again (a cell made one read-only so that what it wrote there could not be removed)."""
    current = target
    for part in ["", *(p for p in rel_dir.split(os.sep) if p)]:
        current = os.path.join(current, part) if part else current
        try:
            info = os.lstat(current)
        except OSError:
            return
        if not stat.S_ISDIR(info.st_mode):
            return  # a symlink or a file: never followed
        if info.st_mode & 0o700 != 0o700 and info.st_uid == os.geteuid():
            with contextlib.suppress(OSError):
                os.chmod(current, stat.S_IMODE(info.st_mode) | 0o700)
