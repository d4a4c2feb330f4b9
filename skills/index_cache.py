"""The host's skill index, kept per set of roots and rebuilt only when what it is built from changed.

Every prompt (the system prompt's skill section), every `/skill:` listing and every `/skill:<name>`
asks for the index. Each ask scans the roots again through the safe reader (`user_skills.scan`: the
folder names and the bounded head of each SKILL.md, regular files only) -- by content, never by
mtime, so a rewrite within one timestamp tick is still seen -- and the index is rebuilt only when
the scan's fingerprint differs from the one it was built from. The host's index carries no Python
paths (finding them walks every skill folder; only the kernel needs them, and it finds its own).
Callers run it off the event loop (it reads the workspace). Stdlib only.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable

from skills.user_skills import SkillIndex, build, scan

__all__ = ["MAX_CACHED_ROOT_SETS", "SkillIndexCache"]

# Distinct sets of roots remembered (one per session cwd); the least recently used goes first.
MAX_CACHED_ROOT_SETS = 32


class SkillIndexCache:
    """Skill indexes by their roots, each with the fingerprint of the scan it was built from."""

    def __init__(self, max_entries: int = MAX_CACHED_ROOT_SETS) -> None:
        self._max_entries = max_entries
        self._entries: OrderedDict[tuple[str, ...], tuple[str, SkillIndex]] = OrderedDict()
        self._lock = threading.Lock()  # asked from worker threads of several sessions at once
        self.builds = 0  # how many times an index was built (not served from the cache)

    def index(self, roots: Iterable[str | os.PathLike[str]]) -> SkillIndex:
        """The index of `roots` as their content is now."""
        root_list = [os.fspath(r) for r in roots]
        key = tuple(root_list)
        scanned = scan(root_list)  # outside the lock: the reads must not queue other sessions
        fingerprint = scanned.fingerprint()
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None and cached[0] == fingerprint:
                self._entries.move_to_end(key)
                return cached[1]
        index = build(scanned, python=False)
        with self._lock:
            self.builds += 1
            self._entries[key] = (fingerprint, index)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
        return index
