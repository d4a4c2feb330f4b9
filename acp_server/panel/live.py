"""The live feed: watch the stores' files and tell every open page what changed (server-sent events).

One asyncio task polls, every 250 ms, the few files whose change means the page is stale: each
store's `refinements.jsonl` (a refinement or rollback) and `harness_state.json` (tombstones), its
`pending/` directory (reviews), the sessions directory (a new session) and, once a second,
`/proc/locks` (a session opened or closed). A stat per file is cheap; nothing is parsed until a
page asks. Quiescence: every session's `quiescence.json` (kept by the server that has it open,
acp_server/sessions/quiescence_file.py) is re-read when one of those files or the sessions' owners change;
inside an ACP server (a `ServerLink`), each poll while a page listens also reads the sessions open
in this server from memory (on the server loop). `quiescence` goes out with the whole snapshot
when it differs from the last one. Each change goes to every subscriber's queue; a page that falls
far behind is told to reload everything instead of being sent a backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server.panel.sessions import held_flocks, published_quiescence, session_ids

if TYPE_CHECKING:
    from acp_server.panel.link import ServerLink

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25
LOCKS_EVERY = 4  # polls: the open/closed state is read once a second
QUEUE_LIMIT = 64
QUIESCENCE = "quiescence"  # the watched key of a session's quiescence.json (not a store change)
QUIESCENCE_FILE = "quiescence.json"  # acp_server.sessions.quiescence_file.FILE

StatKey = tuple[int, int, int] | None


def _stat(path: Path) -> StatKey:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def snapshot(home: Path, sessions: list[str]) -> dict[tuple[str, str], StatKey]:
    """`{(store key, what): stat}` for every watched file of the global and each session store."""
    keys: dict[tuple[str, str], StatKey] = {}
    roots = [("global", home / "harness")] + [(sid, home / "sessions" / sid / "harness") for sid in sessions]
    for key, root in roots:
        keys[(key, "history")] = _stat(root / "refinements.jsonl")
        keys[(key, "state")] = _stat(root / "harness_state.json")
        keys[(key, "pending")] = _stat(root / "pending")
    for sid in sessions:
        keys[(sid, QUIESCENCE)] = _stat(home / "sessions" / sid / QUIESCENCE_FILE)
    return keys


class LiveFeed:
    """Polls the stores and fans changes out to subscribers (one queue per open page)."""

    def __init__(
        self, home: Path, *, poll_seconds: float = POLL_SECONDS, link: ServerLink | None = None
    ) -> None:
        self.home = Path(home)
        self.poll_seconds = poll_seconds
        self.link = link
        self._quiet: dict[str, dict[str, Any]] | None = None
        self._published: dict[str, dict[str, Any]] | None = None  # the files, as the feed last read them
        self._subscribers: set[asyncio.Queue[dict[str, Any]]] = set()
        self._task: asyncio.Task[None] | None = None
        self._sessions: list[str] = []
        self._sessions_key: StatKey = None
        self._files: dict[tuple[str, str], StatKey] = {}
        self._owners: dict[tuple[int, int], int] | None = None

    def subscribe(self) -> asyncio.Queue[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_LIMIT)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self._subscribers.discard(queue)

    def start(self) -> None:
        if self._task is None:
            self._scan()  # the baseline: only later changes are news
            self._owners = held_flocks()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="panel-live-feed")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def quiescence(self, *, reread: bool = True) -> dict[str, dict[str, Any]]:
        """Every session's quiescence: inside an ACP server, the sessions it has open from memory;
        every other session from the file its server publishes — re-read unless `reread` is
        false (the feed's own polls, when no file and no owner changed). Blocking (the hop to the
        server loop, the files): call from a worker thread."""
        inside: dict[str, dict[str, Any]] = {}
        if self.link is not None:
            from acp_server.panel.link import ServerGone

            try:
                inside = self.link.quiescence()
            except ServerGone:  # the server is exiting: its files say what they say
                inside = {}
            except Exception:
                log.exception("the panel could not read the sessions' quiescence")
        published = self._published
        if reread or published is None:
            published = published_quiescence(self.home)
            if not reread:
                self._published = published
        return {**{sid: q for sid, q in published.items() if sid not in inside}, **inside}

    def publish(self, event: dict[str, Any]) -> None:
        """Send `event` to every page (a full queue gets a single `reload` instead)."""
        for queue in list(self._subscribers):
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait({"type": "reload"})

    def _scan(self) -> tuple[set[tuple[str, str]], bool]:
        """Stat everything; (changed (store, what) pairs, sessions list changed)."""
        sessions_changed = False
        key = _stat(self.home / "sessions")
        if key != self._sessions_key:
            self._sessions_key = key
            fresh = session_ids(self.home)
            sessions_changed = fresh != self._sessions
            self._sessions = fresh
        files = snapshot(self.home, self._sessions)
        changed = {k for k, v in files.items() if self._files.get(k) != v}
        self._files = files
        return changed, sessions_changed

    async def _run(self) -> None:
        tick = 0
        while True:
            await asyncio.sleep(self.poll_seconds)
            tick += 1
            try:
                changed, sessions_changed = await asyncio.to_thread(self._scan)
                owners_changed = False
                if tick % LOCKS_EVERY == 0:
                    owners = await asyncio.to_thread(held_flocks)
                    owners_changed = owners != self._owners
                    self._owners = owners
            except Exception:
                log.exception("the panel's live feed could not read the stores")
                continue
            quiet_changed = any(what == QUIESCENCE for _store, what in changed)
            changed = {(store, what) for store, what in changed if what != QUIESCENCE}
            if changed:
                stores = sorted({store for store, _what in changed})
                what = sorted({w for _store, w in changed})
                self.publish({"type": "change", "stores": stores, "what": what, "at": time.time()})
            if sessions_changed or owners_changed:
                self.publish({"type": "sessions", "at": time.time()})
            stale = quiet_changed or sessions_changed or owners_changed or self._quiet is None
            if stale:
                self._published = None  # the files are re-read at the next snapshot
            if self._subscribers and (self.link is not None or stale):
                try:
                    quiet = await asyncio.to_thread(partial(self.quiescence, reread=False))
                except Exception:
                    log.exception("the panel's live feed could not read the sessions' quiescence")
                    continue
                if quiet != self._quiet:
                    self._quiet = quiet
                    self.publish({"type": "quiescence", "sessions": quiet, "at": time.time()})
