"""Loading and atomically saving `harness_state.json`.

The state file sits on every prompt build, so loading never raises on damage: a missing,
unreadable, non-JSON or wrongly shaped file is reported as `damaged` (with what could be salvaged)
and the store rebuilds it from the history (`recovery.py`). Each save carries a random `save_token` near the start of the file so a store can tell
in O(1) whether the file is still the one it last read or wrote (re-read inside the lock without
re-parsing 10,000 entries when nothing changed).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from harness_store.errors import HarnessStoreError
from harness_store.models import KINDS, HarnessEntry, HarnessState, Tombstone, empty_entries
from host_base import private_files

log = logging.getLogger("harness_store")

FORMAT = 1
_TOKEN = re.compile(rb'^\{"format":\s*\d+,\s*"save_token":\s*"([0-9a-f]+)"')
TEMP_MARK = ".tmp-"


@dataclass(frozen=True)
class Loaded:
    state: HarnessState
    token: str | None
    # True when the file existed but could not be used (the warning has been logged).
    damaged: bool


def peek_token(path: Path) -> str | None:
    """The save token of the file at `path` (reads only its first bytes), or None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(128)
    except OSError:
        return None
    match = _TOKEN.match(head)
    return match.group(1).decode("ascii") if match else None


def _salvage(raw: dict[str, Any], path: Path) -> HarnessState:
    """Keep every well-formed entry of a file whose overall shape failed validation."""
    entries = empty_entries()
    dropped = 0
    raw_entries = raw.get("entries")
    if isinstance(raw_entries, dict):
        for kind in KINDS:
            items = raw_entries.get(kind)
            if not isinstance(items, dict):
                continue
            for key, value in items.items():
                try:
                    entries[kind][key] = HarnessEntry.model_validate(value)
                except ValidationError:
                    dropped += 1
    tombstones: list[Tombstone] = []
    raw_tombstones = raw.get("tombstones")
    for item in raw_tombstones if isinstance(raw_tombstones, list) else []:
        try:
            tombstones.append(Tombstone.model_validate(item))
        except ValidationError:
            dropped += 1
    head = raw.get("head") if isinstance(raw.get("head"), str) else None
    kept = sum(len(items) for items in entries.values())
    log.warning(
        "harness state %s does not have the expected shape: kept %d well-formed entries and "
        "%d tombstones, skipped %d malformed item(s); the next save rewrites the file",
        path,
        kept,
        len(tombstones),
        dropped,
    )
    return HarnessState.build(entries, tombstones, head)


def load_state(path: Path) -> Loaded:
    """Read the state; never raises (see module docstring)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Loaded(HarnessState(), None, damaged=False)
    except OSError as exc:
        log.warning("harness state %s is unreadable (%s); rebuilding it from the history", path, exc)
        return Loaded(HarnessState(), None, damaged=True)
    match = _TOKEN.match(data)
    token = match.group(1).decode("ascii") if match else None
    try:
        return Loaded(HarnessState.model_validate_json(data), token, damaged=False)
    except ValidationError:
        pass
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("harness state %s is not valid JSON (%s); rebuilding it from the history", path, exc)
        return Loaded(HarnessState(), None, damaged=True)
    if not isinstance(raw, dict):
        log.warning("harness state %s is not a JSON object; rebuilding it from the history", path)
        return Loaded(HarnessState(), None, damaged=True)
    return Loaded(_salvage(raw, path), token, damaged=True)


# Each kind's entries dict (by identity, held) -> its JSON: a write changes the dicts of the kinds it
# touched only (copy-on-write), so saving a 10,000-entry state after a 5-edit apply encodes one
# kind, not all of them. The bytes are exactly `model_dump_json`'s.
_KIND_JSON: dict[int, tuple[dict[str, HarnessEntry], bytes]] = {}
_ENTRIES: TypeAdapter[dict[str, HarnessEntry]] | None = None


def _kind_json(items: dict[str, HarnessEntry]) -> bytes:
    global _ENTRIES
    hit = _KIND_JSON.get(id(items))
    if hit is not None and hit[0] is items:
        return hit[1]
    if _ENTRIES is None:
        _ENTRIES = TypeAdapter(dict[str, HarnessEntry])
    data = _ENTRIES.dump_json(items)
    if len(_KIND_JSON) >= 16:
        _KIND_JSON.pop(next(iter(_KIND_JSON)))
    _KIND_JSON[id(items)] = (items, data)
    return data


def serialize(state: HarnessState, token: str) -> bytes:
    """The state file's bytes, with the format and save token first (see `peek_token`)."""
    rest = HarnessState.model_construct(entries={}, tombstones=state.tombstones, head=state.head)
    tail = rest.model_dump_json().encode("utf-8")  # {"entries":{},"tombstones":[...],"head":...}
    kinds = b",".join(
        b"%s:%s" % (json.dumps(kind).encode(), _kind_json(items)) for kind, items in state.entries.items()
    )
    return (
        b'{"format":%d,"save_token":"%s","entries":{%s}' % (FORMAT, token.encode("ascii"), kinds) + tail[13:]
    )


def remove_stale_temps(path: Path) -> None:
    """Delete temp files a killed writer left behind (call only while holding the store lock)."""
    prefix = f".{path.name}{TEMP_MARK}"
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            try:
                os.unlink(path.parent / name)
            except OSError as exc:
                log.warning("cannot remove stale temp file %s: %s", path.parent / name, exc)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` via temp file + fsync + rename (`private_files.write_atomic`); keeps
    an existing file's mode, new files 0600. The temp name carries `TEMP_MARK` and the writer's pid,
    so a killed writer's leftovers are found by `remove_stale_temps`."""
    temp = path.parent / f".{path.name}{TEMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        private_files.write_atomic(path, data, mode=None, temp=temp, sync_dir=True)
    except OSError as exc:
        raise HarnessStoreError(f"cannot save the harness state {path}: {exc.strerror}") from exc


def save_state(path: Path, state: HarnessState) -> str:
    """Save atomically and return the new save token."""
    token = secrets.token_hex(8)
    write_atomic(path, serialize(state, token))
    return token
