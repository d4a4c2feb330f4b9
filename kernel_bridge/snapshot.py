"""Host side of kernel snapshots: where the files live, how they are checked, what code runs.

The pickling itself happens in the kernel (kernelside.py); the host decides when, checks that a
snapshot file is the session's own before asking the kernel to unpickle it, and words the report.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_bridge.events import RestoreReport

log = logging.getLogger(__name__)

STATE_FILE = "kernel-state.dill"
MANIFEST_FILE = "kernel-state.json"
PER_VARIABLE_CAP = 16 * 1024 * 1024
TOTAL_CAP = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SnapshotPaths:
    directory: Path
    state: Path
    manifest: Path

    @classmethod
    def at(cls, location: Path) -> SnapshotPaths:
        """`location` is the snapshot directory, or the `.dill` file inside it."""
        if location.suffix == ".dill":
            return cls(location.parent, location, location.with_suffix(".json"))
        return cls(location, location / STATE_FILE, location / MANIFEST_FILE)


def untrusted_reason(path: Path) -> str | None:
    """Why `path` must not be unpickled (unpickling runs code), or None when it is ours and private."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return "no snapshot file"
    if not path.is_file() or path.is_symlink():
        return f"{path} is not a regular file"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"{path} is owned by another user"
    if info.st_mode & 0o077:
        return f"{path} is readable or writable by others (mode {oct(info.st_mode & 0o777)}); expected 0600"
    return None


def remove_stale_temps(paths: SnapshotPaths) -> list[Path]:
    """Delete temp files of snapshots that never finished (a kernel killed mid-write); returns them.

    Call only while no snapshot of this session runs (the session lock): each can be as large as
    the total cap, and a kernel that dies while writing never comes back to remove its own.
    """
    removed: list[Path] = []
    for target in (paths.state, paths.manifest):
        for temp in target.parent.glob(f"{target.name}.tmp-*"):
            try:
                temp.unlink()
            except OSError as exc:
                log.warning("cannot remove the unfinished snapshot file %s: %s", temp, exc)
                continue
            removed.append(temp)
    return removed


def read_manifest(paths: SnapshotPaths) -> dict[str, Any] | None:
    """The snapshot's JSON manifest, or None when it is missing or unreadable."""
    try:
        data = json.loads(paths.manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def snapshot_code(paths: SnapshotPaths, per_variable_cap: int, total_cap: int) -> str:
    """Internal cell code that snapshots the user's variables into `paths`."""
    return (
        "import _continual_acp_kernel as _cak_\n"
        f"_cak_.last_result = _cak_.snapshot({str(paths.state)!r}, {str(paths.manifest)!r}, "
        f"{per_variable_cap}, {total_cap})\n"
    )


def restore_code(paths: SnapshotPaths) -> str:
    """Internal cell code that restores the snapshot at `paths`."""
    return f"import _continual_acp_kernel as _cak_\n_cak_.last_result = _cak_.restore({str(paths.state)!r})\n"


def restore_report(payload: dict[str, Any]) -> RestoreReport:
    """The kernel-side restore result as a `RestoreReport`."""
    return RestoreReport(
        restored=[str(n) for n in payload.get("restored", [])],
        failed={str(k): str(v) for k, v in dict(payload.get("failed", {})).items()},
        skipped={str(k): str(v) for k, v in dict(payload.get("skipped", {})).items()},
    )


def restart_report(reason: str, restore: RestoreReport | None, known_names: list[str]) -> str:
    """The text the model gets after its kernel was replaced: what came back and what is gone."""
    lines = [f"The kernel was restarted: {reason}."]
    if restore is None:
        lines.append("Nothing was restored; the kernel starts empty.")
        if known_names:
            lines.append("Lost: " + ", ".join(known_names) + ".")
        return " ".join(lines)
    lines.append(restore.describe())
    back = set(restore.restored)
    lost = [n for n in known_names if n not in back and n not in restore.failed and n not in restore.skipped]
    if lost:
        lines.append("Lost (defined after the last snapshot): " + ", ".join(lost) + ".")
    if restore.failed or restore.skipped or lost:
        lines.append("Re-create what you still need.")
    return " ".join(lines)
