"""Identifiers and timestamps: entry slugs, refinement ids, tombstone ids, ISO-8601 UTC stamps."""

from __future__ import annotations

import re
import secrets
import threading
import time
from datetime import UTC, datetime

_NON_SLUG = re.compile(r"[^a-z0-9]+")
_SLUG_MAX = 80

_last_ms = 0
_last_lock = threading.Lock()


def slugify(title: str, fallback: str) -> str:
    """Lowercase, runs of non `[a-z0-9]` -> `_`, trimmed, at most 80 chars; `fallback` when empty."""
    slug = _NON_SLUG.sub("_", title.lower()).strip("_")[:_SLUG_MAX].strip("_")
    return slug or fallback


def utc_now() -> str:
    """Current time as ISO-8601 UTC with milliseconds and a `Z`."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _monotonic_ms() -> int:
    # Wall-clock milliseconds that never go backwards inside this process, so ids made here sort
    # in the order they were made even if the clock steps back.
    global _last_ms
    with _last_lock:
        now = time.time_ns() // 1_000_000
        _last_ms = max(now, _last_ms)
        return _last_ms


def new_refinement_id() -> str:
    """Time-ordered id with a random suffix: two made in the same millisecond never collide."""
    ms = _monotonic_ms()
    stamp = datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y%m%d-%H%M%S")
    return f"r-{stamp}{ms % 1000:03d}-{secrets.token_hex(4)}"


def new_tombstone_id() -> str:
    """A random tombstone id (`t-` + 10 hex digits)."""
    return f"t-{secrets.token_hex(5)}"
