"""`CellRun`: the live view of one executing cell (an async iterator of events) and its result."""

from __future__ import annotations

import asyncio
from collections import deque
from pathlib import Path

from kernel_bridge.events import CellEvent, CellResult, ClearOutput, Display, Error, Finished, Result, Stream
from kernel_bridge.output import truncate_middle

# Events waiting for a slow (or absent) consumer are capped; the rest is on disk.
DEFAULT_LIVE_BUFFER_CHARS = 4 * 1024 * 1024


def _event_size(event: CellEvent) -> int:
    if isinstance(event, Stream):
        return len(event.text)
    if isinstance(event, Display | Result):
        return sum(len(value) for value in event.data.values())
    return 0


class CellRun:
    """Events of one cell as they happen, then its `CellResult`.

    The cell runs whether or not anyone iterates: `execute()` has already queued it. Iterate with
    `async for event in run` (the last event is always `Finished`), or just `await run.result()`.
    Events a consumer has not taken yet are held up to a character budget; beyond it stream and
    display events are dropped from the live view (a notice says how much, and the full text stays
    in `full_output_path`).
    """

    def __init__(self, code: str, live_buffer_chars: int = DEFAULT_LIVE_BUFFER_CHARS) -> None:
        self.code = code
        self._budget = live_buffer_chars
        self._events: deque[CellEvent] = deque()
        self._buffered = 0
        self.peak_buffered_chars = 0
        self._dropped = 0
        self._full_output_path: Path | None = None
        self._wake = asyncio.Event()
        self._done = asyncio.Event()
        self._result: CellResult | None = None
        self.started = asyncio.Event()

    # -- producer side (the session) -------------------------------------------------------------

    def _append(self, event: CellEvent, size: int) -> None:
        self._events.append(event)
        self._buffered += size
        self.peak_buffered_chars = max(self.peak_buffered_chars, self._buffered)
        self._wake.set()

    def _flush_drop_notice(self) -> None:
        if self._dropped:
            where = f" (full output: {self._full_output_path})" if self._full_output_path else ""
            notice = f"\n[... {self._dropped} characters not shown live{where} ...]\n"
            self._dropped = 0
            self._append(Stream("stderr", notice), 0)

    def push(self, event: CellEvent) -> None:
        """Add one event for the consumer (stream/display events past the live budget are dropped and counted)."""
        if isinstance(event, Stream) and len(event.text) > self._budget // 2:
            event = Stream(event.name, truncate_middle(event.text, self._budget // 2))
        size = _event_size(event)
        droppable = isinstance(event, Stream | Display | Result)
        if droppable and self._buffered + size > self._budget:
            self._dropped += size
            return
        if not isinstance(event, ClearOutput | Error | Finished):
            self._flush_drop_notice()
        self._append(event, size)

    def finish(self, result: CellResult) -> None:
        """End the run with its result; `Finished` becomes the last event. Later calls are ignored."""
        if self._result is not None:
            return
        self._full_output_path = result.full_output_path
        self._flush_drop_notice()
        self._append(Finished(result.status, result.duration), 0)
        self._result = result
        self._done.set()

    def set_output_path(self, path: Path) -> None:
        """Where the full output goes (named in the notice about output not shown live)."""
        self._full_output_path = path

    @property
    def done(self) -> bool:
        """True once the cell has a result."""
        return self._result is not None

    # -- consumer side -----------------------------------------------------------------------------

    def __aiter__(self) -> CellRun:
        return self

    async def __anext__(self) -> CellEvent:
        while not self._events:
            if self._result is not None:
                raise StopAsyncIteration
            self._wake.clear()
            await self._wake.wait()
        event = self._events.popleft()
        self._buffered -= _event_size(event) if isinstance(event, Stream | Display | Result) else 0
        if self._buffered < 0:
            self._buffered = 0
        return event

    async def result(self) -> CellResult:
        """Wait for the cell to finish; works whether or not the events were iterated."""
        await self._done.wait()
        assert self._result is not None
        return self._result

    async def wait_started(self) -> None:
        await self.started.wait()


__all__ = ["CellRun", "ClearOutput", "Display", "Error", "Finished", "Result", "Stream"]
