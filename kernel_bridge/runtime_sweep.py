"""Removing the runtime dirs (`<tmp>/cacp-*`) of servers that died without cleaning up.

A server removes its runtime dir (connection files, sockets, kernel logs) on exit, but a SIGKILL
gives it no chance. Each runtime dir therefore names its owner in an `owner` file (pid and process
start time, so a reused pid is not mistaken for the owner); a starting server removes the dirs of
this user whose owner is gone. Dirs of live servers, of other users and without an owner file are
never touched.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from host_base.process_identity import is_same_process, start_time

log = logging.getLogger(__name__)

PREFIX = "cacp-"
OWNER_FILE = "owner"


def create_runtime_dir(parent: Path | None = None) -> Path:
    """A new private `cacp-*` dir that already holds this process's complete owner file.

    The dir is made and claimed under a name the sweep ignores, then renamed into place (rename is
    atomic): a server killed while creating it can never leave a `cacp-*` dir whose owner file is
    missing or half-written, which a sweep must leave alone (it cannot tell whose it is).
    """
    base = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    staging = Path(tempfile.mkdtemp(prefix=f".{PREFIX}new-", dir=base))
    claim(staging)
    final = base / (PREFIX + staging.name[len(f".{PREFIX}new-") :])
    os.rename(staging, final)
    return final


def claim(runtime: Path) -> None:
    """Record this process as the owner of `runtime`."""
    pid = os.getpid()
    path = runtime / OWNER_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(f"{pid} {start_time(pid) or '-'}\n")


def _owner_alive(text: str) -> bool:
    parts = text.split()
    try:
        pid = int(parts[0])
    except (IndexError, ValueError):
        return True  # unreadable: not ours to judge
    recorded = parts[1] if len(parts) > 1 else "-"
    # Someone else's process with that pid counts as alive (not ours anyway); a pid reused by a
    # later process has another start time.
    return is_same_process(pid, None if recorded == "-" else recorded)


def sweep_dead(directory: Path | None = None, *, keep: Path | None = None) -> list[Path]:
    """Remove this user's `cacp-*` dirs in `directory` (default: the temp dir) whose owner is dead."""
    base = Path(directory) if directory is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    uid = os.getuid() if hasattr(os, "getuid") else None
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIX) or (keep is not None and Path(entry.path) == keep):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            if uid is not None and entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            owner = (Path(entry.path) / OWNER_FILE).read_text(encoding="ascii", errors="replace")
        except OSError:
            continue  # no owner file (an older version's dir, or being created): leave it
        if _owner_alive(owner):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            removed.append(Path(entry.path))
    if removed:
        log.info(
            "removed %d runtime dir(s) left by dead servers: %s", len(removed), ", ".join(map(str, removed))
        )
    return removed
