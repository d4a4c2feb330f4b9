"""`sessions/.index.json`: what `session/list` shows of every session, kept in one file.

Listing 1,000 sessions by opening 1,000 `meta.json` files costs ~100 ms on a busy 2-core machine;
the index turns that into one read plus a `stat` of each session's meta file and transcript. The
directory listing stays the authority: a session directory the index lacks is read and added, an
entry whose directory is gone is dropped, an entry whose `meta.json` changed since (its mtime or
size; another process renamed the session) is read again. A missing, corrupt or foreign index is
rebuilt from the meta files, so no session is ever lost to it. Written whole to a temp file and
renamed (0600), only when something changed; two processes writing at once lose nothing either
(the loser's entries are simply re-read at the next list).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from host_base.private_files import write_atomic

log = logging.getLogger(__name__)

INDEX = ".index.json"
VERSION = 1
ReadMeta = Callable[[str], "dict[str, Any] | None"]


def _stamp(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_mtime_ns, info.st_size]


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("session index %s is unreadable (%s); rebuilding it", path, exc)
        return {}
    if (
        not isinstance(data, dict)
        or data.get("version") != VERSION
        or not isinstance(data.get("sessions"), dict)
    ):
        log.warning("session index %s is not one this version wrote; rebuilding it", path)
        return {}
    return {k: v for k, v in data["sessions"].items() if isinstance(k, str) and isinstance(v, dict)}


def _write(path: Path, sessions: dict[str, dict[str, Any]]) -> None:
    text = json.dumps({"version": VERSION, "sessions": sessions}, separators=(",", ":"))
    try:
        write_atomic(path, text, sync=False)  # rebuilt from the meta files if a crash loses it
    except OSError as exc:  # a read-only data dir still lists (from the meta files)
        log.warning("could not write the session index %s: %s", path, exc)


def indexed_sessions(root: Path, meta_name: str, read_meta: ReadMeta) -> dict[str, dict[str, Any]]:
    """Every session directory under `root` -> its meta (`cwd`, `title`, `created_at`, `updated_at`),
    from the index where it is current, else from `read_meta` (and the index updated)."""
    path = root / INDEX
    known = _read(path)
    current: dict[str, dict[str, Any]] = {}
    for entry in os.scandir(root):
        if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
            continue
        stamp = _stamp(os.path.join(entry.path, meta_name))
        cached = known.get(entry.name)
        if cached is not None and stamp is not None and cached.get("stamp") == stamp:
            current[entry.name] = cached
            continue
        try:
            meta = read_meta(entry.name)
        except ValueError:  # a name that is not a session id: not ours to list
            continue
        if meta is None:
            continue
        record: dict[str, Any] = {key: meta.get(key) for key in ("cwd", "title", "created_at", "updated_at")}
        if stamp is not None:  # no meta file (read from the header): not cached, read each time
            record["stamp"] = stamp
        current[entry.name] = record
    cacheable = {name: record for name, record in current.items() if "stamp" in record}
    if cacheable != known:
        _write(path, cacheable)
    return current
