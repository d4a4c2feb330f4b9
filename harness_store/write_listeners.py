"""Who wants to know that this process wrote a project harness: the paths of each locked write.

A session's control-plane guard (agent_core) compares `.continual-acp/` before and after every cell
and holds what a cell changed; the store's own writes must not look like a cell's. Every
`ProjectStore` of a repository, whichever instance wrote, reports the files it wrote here while it
still holds the store lock, so a guard that checks under the same lock never sees a write half done.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("harness_store")

Listener = Callable[[Sequence[Path]], None]

_lock = threading.Lock()
_listeners: dict[str, list[Listener]] = {}


def _key(root: Path) -> str:
    try:
        return str(root.resolve())
    except OSError:
        return str(root.absolute())


def register(root: Path, listener: Listener) -> None:
    """Call `listener(paths)` after each write beneath `root` (the harness dir or an ancestor)."""
    with _lock:
        _listeners.setdefault(_key(root), []).append(listener)


def unregister(root: Path, listener: Listener) -> None:
    with _lock:
        found = _listeners.get(_key(root), [])
        if listener in found:
            found.remove(listener)
        if not found:
            _listeners.pop(_key(root), None)


def notify(root: Path, paths: Sequence[Path]) -> None:
    """Tell the listeners of `root` which files were just written (a listener's error is logged)."""
    if not paths:
        return
    key = _key(root)
    with _lock:
        found = [
            listener
            for registered, listeners in _listeners.items()
            if key == registered or key.startswith(registered.rstrip("/") + "/")
            for listener in listeners
        ]
    for listener in found:
        try:
            listener(paths)
        except Exception:
            log.exception("a project harness write listener failed")
