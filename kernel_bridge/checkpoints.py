"""Host side of per-turn checkpoints: the cells that take and restore them, and copying them out.

The pickling and the content-addressed store live in the kernel (checkpoint_kernelside.py), on the
kernel's filesystem like the snapshot; this module builds the internal cells, and turns one
checkpoint into an ordinary snapshot file (a fork's kernel restores that at its start).
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from host_base.private_files import write_atomic
from kernel_bridge import checkpoint_kernelside
from kernel_bridge.snapshot import SnapshotPaths, untrusted_reason

MODULE = "_continual_acp_checkpoints"
DIRECTORY = "checkpoints"
DEFAULT_MAX_COUNT = 100
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CheckpointBounds:
    """How many checkpoints a session keeps, and how many bytes their store may hold (oldest go first)."""

    max_count: int = DEFAULT_MAX_COUNT
    max_bytes: int = DEFAULT_MAX_BYTES


def store_dir(snapshot_dir: Path) -> Path:
    """Where a session's checkpoint store lives, next to its snapshot."""
    return snapshot_dir / DIRECTORY


@functools.cache
def _load_code() -> str:
    source = Path(checkpoint_kernelside.__file__).read_text(encoding="utf-8")
    return (
        "def __cacp_ckpt_boot(src):\n"
        "    import sys, types\n"
        f"    if {MODULE!r} in sys.modules:\n"
        f"        return sys.modules[{MODULE!r}]\n"
        f"    m = types.ModuleType({MODULE!r})\n"
        "    exec(compile(src, '<continual-acp checkpoints>', 'exec'), m.__dict__)\n"
        "    sys.modules[m.__name__] = m\n"
        "    return m\n"
        f"_cck_ = __cacp_ckpt_boot({source!r})\n"
        "del __cacp_ckpt_boot\n"
        "import _continual_acp_kernel as _cak_\n"
    )


_BOUND = "import _continual_acp_checkpoints as _cck_, _continual_acp_kernel as _cak_\n"


def checkpoint_code(
    directory: Path,
    label: str,
    per_variable_cap: int,
    total_cap: int,
    bounds: CheckpointBounds,
    drop: list[str],
    *,
    load: bool = True,
) -> str:
    """Internal cell code taking checkpoint `label` into the store at `directory`; `load=False` when
    this kernel already has the module (its source is ~10 KB to parse in every cell otherwise)."""
    return (_load_code() if load else _BOUND) + (
        f"_cak_.last_result = _cck_.checkpoint({str(directory)!r}, {label!r}, {per_variable_cap}, "
        f"{total_cap}, {bounds.max_count}, {bounds.max_bytes}, {drop!r})\n"
    )


def restore_checkpoint_code(directory: Path, label: str, *, load: bool = True) -> str:
    """Internal cell code making the user's variables those of checkpoint `label`."""
    return (
        _load_code() if load else _BOUND
    ) + f"_cak_.last_result = _cck_.restore_checkpoint({str(directory)!r}, {label!r})\n"


def manifest_path(directory: Path, label: str) -> Path:
    return directory / f"ckpt-{label}.json"


def read_checkpoint(directory: Path, label: str) -> dict[str, Any]:
    """A checkpoint's manifest; raises ValueError when it is missing, not ours, or damaged."""
    path = manifest_path(directory, label)
    refused = untrusted_reason(path)
    if refused is not None:
        raise ValueError(f"checkpoint {label}: {refused}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"checkpoint {label} cannot be read: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("saved"), dict):
        raise ValueError(f"checkpoint {label} is damaged (no saved names)")
    return data


def export_snapshot(directory: Path, label: str, target: SnapshotPaths) -> list[str]:
    """Write checkpoint `label` as an ordinary snapshot at `target`; returns the names it holds.

    The values stay pickled bytes (nothing is unpickled here): the snapshot container holds the
    same per-variable pickles the kernel wrote.
    """
    manifest = read_checkpoint(directory, label)
    values: dict[str, bytes] = {}
    for name, info in manifest["saved"].items():
        blob = directory / "blobs" / str(info["hash"])
        refused = untrusted_reason(blob)
        if refused is not None:
            raise ValueError(f"checkpoint {label}: value {name}: {refused}")
        values[name] = blob.read_bytes()
    container = {
        "format": 1,
        "created": manifest.get("created"),
        "pickler": manifest.get("pickler", "dill"),
        "values": values,
        "skipped": manifest.get("skipped", {}),
    }
    target.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    _write_private(target.state, pickle.dumps(container, pickle.HIGHEST_PROTOCOL))
    saved = {
        name: {"bytes": len(blob), "type": manifest["saved"][name].get("type")}
        for name, blob in values.items()
    }
    summary = {
        "format": 1,
        "created": manifest.get("created"),
        "saved": saved,
        "skipped": container["skipped"],
    }
    _write_private(target.manifest, json.dumps(summary, indent=1, sort_keys=True).encode("utf-8"))
    return sorted(values)


def copy_store(source: Path, target: Path, labels: list[str]) -> None:
    """Copy the named checkpoints (and the values they use) into another session's store.

    Values are hard-linked where the filesystem allows (they are never modified, only replaced), so
    a fork costs no copy of a large kernel's state.
    """
    if not labels:
        return
    (target / "blobs").mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(target, 0o700)
    for label in labels:
        manifest = read_checkpoint(source, label)
        for info in manifest["saved"].values():
            name = str(info["hash"])
            destination = target / "blobs" / name
            if destination.exists():
                continue
            try:
                os.link(source / "blobs" / name, destination)
            except OSError:
                shutil.copy2(source / "blobs" / name, destination)
        shutil.copy2(manifest_path(source, label), manifest_path(target, label))


def _write_private(path: Path, data: bytes) -> None:
    # The temp name is the snapshot's (`<name>.tmp-<pid>`): `snapshot.remove_stale_temps` sweeps it.
    write_atomic(path, data, temp=path.with_name(f"{path.name}.tmp-{os.getpid()}"))
