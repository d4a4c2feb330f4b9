"""Steering: messages sent into a running turn, waiting for its next model request.

Each waits with the future its sender awaits: True once the turn took it, False when the turn
ended (or was never started) first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agent_core import events as ev


class SteeringQueue:
    def __init__(self) -> None:
        self._waiting: list[tuple[list[ev.PromptPart], asyncio.Future[bool], str | None]] = []

    def add(
        self, parts: Sequence[ev.PromptPart], message_id: str | None, *, running: bool, queue: bool
    ) -> asyncio.Future[bool]:
        """Send a message into the running turn: it joins at the turn's next model request (the turn
        does not end before it). The future is True once it entered, False if the turn ended first.

        With `queue`, a message sent while no turn runs yet waits for the next turn's first request
        (the caller knows a prompt is on its way to a turn, and calls `drop` when it is answered
        without one). `message_id` names the message where it enters (a v2 prompt answered with that
        id before it entered); else one is made. Raises `RuntimeError` when no turn is `running` and
        `queue` is False."""
        if not running and not queue:
            raise RuntimeError("no turn is running")
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((list(parts), future, message_id))
        return future

    def take(self) -> list[tuple[Sequence[ev.PromptPart], str | None]]:
        """Every waiting message, for the turn's next request; their senders hear True."""
        taken, self._waiting = self._waiting, []
        for _, future, _ in taken:
            if not future.done():
                future.set_result(True)
        return [(parts, message_id) for parts, _, message_id in taken]

    @property
    def waiting(self) -> bool:
        return bool(self._waiting)

    def drop(self) -> None:
        """Answer every waiting message False (no turn will take it)."""
        dropped, self._waiting = self._waiting, []
        for _, future, _ in dropped:
            if not future.done():
                future.set_result(False)
