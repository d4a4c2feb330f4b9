"""Tightening a data dir other users can read (a `mkdir` makes 0755) instead of failing on it."""

from __future__ import annotations

import stat
from collections.abc import Iterable
from pathlib import Path


def tighten(directories: Iterable[Path]) -> tuple[list[str], list[str]]:
    """`chmod go-rwx` each directory: (what changed, e.g. "/d 0755 -> 0700"; what could not be changed)."""
    changed: list[str] = []
    failed: list[str] = []
    for directory in directories:
        try:
            before = stat.S_IMODE(directory.stat().st_mode)
            after = before & ~(stat.S_IRWXG | stat.S_IRWXO)
            directory.chmod(after)
        except OSError as exc:
            failed.append(f"{directory} ({exc.strerror or exc})")
            continue
        changed.append(f"{directory} {before:04o} -> {after:04o}")
    return changed, failed
