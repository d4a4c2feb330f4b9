"""Where a `.continual-acp` is: its link text (None: not a symlink), the directory it resolves to and
that directory's identity (device, inode). The guard compares it at every check: a re-pointed link
or a replaced directory is a change of the whole tree.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

Where = tuple[str | None, str, tuple[int, int] | None]  # (link text, resolved target, (dev, inode))


def where_now(path: Path) -> Where:
    """Where `.continual-acp` is now: its link text (None: not a link), its target, its identity."""
    try:
        link: str | None = os.readlink(path)
    except OSError:
        link = None
    target = os.path.realpath(path)
    try:
        info = os.stat(target)
        identity: tuple[int, int] | None = (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None
    except OSError:
        identity = None
    return link, target, identity


def link_text(link: str | None) -> bytes:
    return f"symlink -> {link}\n".encode("utf-8", "surrogateescape")
