"""The panel's line into the ACP server it runs in (`/harness ui`): its open sessions' harnesses.

When the panel is started inside a running ACP server, its actions must reach the harness the way
a slash command does — through the open session's `HarnessSurface`, so the editor gets the same
refinement card and the session's quiescence counts the work. The surfaces live on the server's
event loop; the panel serves on its own loop in its own thread, so every call crosses over to that
loop (taken when `/harness ui` ran there: anyio's asyncio backend) and is waited for with a bound —
a panel request never hangs on a server that is shutting down (nor holds up its exit).

Which session acts for a store: a session's local store — that session, if this server has it
open; the global store — the session that last asked for the panel (`/harness ui`), if still
open, else the first open one. A store with no such session here is written directly, as the
standalone panel does (docs/harness.md, "The review panel").

`quiescence()` is the true per-session state, read on the server loop: refinement jobs queued and
running and the children still queued or running, in the shape of the quiescence mirror's
background list (acp_server/sessions/background.py) — `quiescence_publisher.snapshot`, the same state the server
publishes in each session's `quiescence.json` for panels in other processes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from acp_server.ports import OpenSession
    from agent_core.refinement.surface import HarnessSurface

T = TypeVar("T")
GLOBAL = "global"
READ_TIMEOUT = 5.0  # reading the sessions (a few attribute reads on the loop)
ACT_TIMEOUT = 120.0  # an action (store locks, the card's delivery)


class ServerGone(RuntimeError):
    """The ACP server's loop no longer runs (it is shutting down) or did not answer in time."""


class ServerLink:
    """The open sessions of the ACP server this panel runs in, and the loop they live on."""

    def __init__(
        self,
        sessions: Callable[[], Mapping[str, OpenSession]],
        loop: asyncio.AbstractEventLoop,
        *,
        preferred: str | None = None,
    ) -> None:
        self._sessions = sessions
        self._loop = loop
        self._lock = threading.Lock()
        self._preferred = preferred

    def prefer(self, session_id: str) -> None:
        """The session that asked for the panel last: it acts for the global store."""
        with self._lock:
            self._preferred = session_id

    def _on_loop(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        if not self._loop.is_running():
            coro.close()
            raise ServerGone("the ACP server is shutting down")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise ServerGone(f"the ACP server did not answer within {timeout:g} s") from None

    def _read(self, read: Callable[[], T]) -> T:
        async def run() -> T:
            return read()

        return self._on_loop(run(), READ_TIMEOUT)

    def _open(self) -> dict[str, OpenSession]:
        # The mapping belongs to the server loop: copy it there, never iterate it from this thread.
        return self._read(lambda: dict(self._sessions()))

    def session_for(self, store_key: str, *, proposer: str | None = None) -> str | None:
        """The open session that acts for `store_key` (`global` or a session id), or None.

        For the global store, `proposer` (the session that proposed a review) comes first."""
        open_now = self._open()
        if store_key != GLOBAL:
            return store_key if store_key in open_now else None
        with self._lock:
            preferred = self._preferred
        for candidate in (proposer, preferred):
            if candidate is not None and candidate in open_now:
                return candidate
        return min(open_now) if open_now else None

    def surface(self, session_id: str) -> HarnessSurface | None:
        """The harness of an open session (None once it closed)."""

        def read() -> HarnessSurface | None:
            # On the loop: a session/new whose setup has not run yet finishes it there.
            opened = self._sessions().get(session_id)
            return opened.harness if opened is not None else None

        return self._read(read)

    def run(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run `call()` (a coroutine on a surface) on the server loop; blocks this worker thread.
        `ServerGone` when the server is shutting down or does not answer in time."""

        async def run() -> T:
            return await call()

        return self._on_loop(run(), ACT_TIMEOUT)

    def quiescence(self) -> dict[str, dict[str, Any]]:
        """`{session id: {quiescent, pending, in_flight, background}}` of every
        session open in this server, read on its loop (one consistent snapshot)."""
        return self._read(self._quiescence_now)

    def _quiescence_now(self) -> dict[str, dict[str, Any]]:
        from acp_server.sessions.quiescence_file import BUSY, SETTLED
        from acp_server.sessions.quiescence_publisher import snapshot

        out: dict[str, dict[str, Any]] = {}
        for sid, opened in self._sessions().items():
            state = snapshot(opened)  # the same snapshot the server publishes to quiescence.json
            out[sid] = {**state, "state": SETTLED if state["quiescent"] else BUSY, "source": "server"}
        return out


__all__ = ["ServerGone", "ServerLink"]
