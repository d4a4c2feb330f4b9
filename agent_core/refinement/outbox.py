"""Ordered delivery of refinement events, and the quiescence they announce.

Everything the coordinator reports -- refinement results, review requests, quiescence transitions --
goes through one outbox and reaches the listeners (the server) in the order it happened. A waiter for
quiescence wakes only after the listeners have received the settling transition: a client that asks
`_harness/await_quiescence` therefore always has the `_harness/quiescence` notification first.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from agent_core.bus import EventBus
from agent_core.events import RefinementReported
from agent_core.refinement.records import QuiescenceChanged, ReviewDecided, ReviewRequested

log = logging.getLogger(__name__)

CoordinatorEvent = RefinementReported | QuiescenceChanged | ReviewRequested | ReviewDecided
Listener = Callable[[CoordinatorEvent], Awaitable[None]]
_FLUSH: Any = object()  # marker: "everything before me was delivered"


class Outbox:
    def __init__(self) -> None:
        self.bus = EventBus("refinement")  # every event, in order, awaited before waiters wake
        # Quiescence as published: flips here first; `_settled` (one event per busy period) is set
        # only after the quiescent transition was delivered.
        self.quiescent = True
        self._settled = anyio.Event()
        self._settled.set()
        self._send, self._receive = anyio.create_memory_object_stream[tuple[Any, anyio.Event | None]](
            max_buffer_size=math.inf
        )

    def add_listener(self, listener: Listener) -> None:
        """`listener` receives every event, in order; it is awaited before waiters wake."""
        self.bus.subscribe(RefinementReported, listener)
        self.bus.subscribe(QuiescenceChanged, listener)
        self.bus.subscribe(ReviewRequested, listener)
        self.bus.subscribe(ReviewDecided, listener)

    def remove_listener(self, listener: Listener) -> None:
        self.bus.unsubscribe(RefinementReported, listener)
        self.bus.unsubscribe(QuiescenceChanged, listener)
        self.bus.unsubscribe(ReviewRequested, listener)
        self.bus.unsubscribe(ReviewDecided, listener)

    def emit(self, event: CoordinatorEvent) -> None:
        self._send.send_nowait((event, None))

    def publish(self, event: QuiescenceChanged) -> None:
        """Announce a quiescence flip (the caller decides that one happened)."""
        self.quiescent = event.quiescent
        if event.quiescent:
            self._send.send_nowait((event, self._settled))
        else:
            self._settled = anyio.Event()
            self._send.send_nowait((event, None))

    async def wait_quiescent(self, timeout: float | None = None) -> bool:
        """Wait until settled (and the settling transition was delivered); False on timeout."""
        with anyio.move_on_after(timeout if timeout is not None else math.inf):
            while True:
                settled = self._settled
                await settled.wait()
                if self.quiescent and self._settled is settled:
                    return True
        return self.quiescent and self._settled.is_set()

    async def flushed(self, timeout: float = 30.0) -> bool:
        """Wait until every event emitted so far has been delivered; False if nobody delivers."""
        done = anyio.Event()
        self._send.send_nowait((_FLUSH, done))
        with anyio.move_on_after(timeout):
            await done.wait()
        return done.is_set()

    async def deliver(self) -> None:
        """Deliver events until cancelled (run by the coordinator's `serve`)."""
        async with self._receive:
            async for event, settle in self._receive:
                if event is not _FLUSH:
                    await self.bus.publish(event)
                if settle is not None:
                    settle.set()
