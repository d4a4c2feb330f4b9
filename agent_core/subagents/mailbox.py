"""Inboxes and scoped routing between a parent, its direct children and siblings.

An agent may address its parent (`"parent"`), its own children and its siblings by name; anything
further away is reached through the node in the middle (a grandchild asks its parent to relay).
The hub owns one `Inbox` per session id (a session's inbox exists even while it is not open here).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from agent_core.subagents.records import ChildRecord, Message


class RoutingError(ValueError):
    """The addressee is not reachable from the sender; the message says who is."""


class Inbox:
    """Messages waiting for one agent; `take` returns them all and empties it."""

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._arrived = asyncio.Event()

    def put(self, message: Message) -> None:
        self._messages.append(message)
        self._arrived.set()

    def __len__(self) -> int:
        return len(self._messages)

    def take(self) -> list[Message]:
        messages, self._messages = self._messages, []
        self._arrived.clear()
        return messages

    async def arrival(self, timeout: float | None) -> int:
        """Wait up to `timeout` seconds for a message without taking any; how many are waiting.

        The kernel waits with this and then takes with `take`: a cell interrupted while it waits
        (the parent's prompt cancelled) abandons only the wait, so no message is taken for a
        reader that is gone.
        """
        if not self._messages:
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except TimeoutError:
                pass
        return len(self._messages)

    async def wait(self, timeout: float | None) -> list[Message]:
        """Messages, waiting up to `timeout` seconds for the first one (None: until one arrives)."""
        if not self._messages:
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except TimeoutError:
                return []
        return self.take()


def resolve(
    sender_id: str,
    to: str,
    *,
    record_of: Callable[[str], ChildRecord | None],
    children_of: Callable[[str], Iterable[ChildRecord]],
) -> tuple[str, str]:
    """`(session id, how it relates)` of the agent `to` names, seen from `sender_id`.

    `record_of(id)` is a session's own link (None for a top-level session); `children_of(id)` its
    direct children.
    """
    own = record_of(sender_id)
    if to == "parent":
        if own is None:
            raise RoutingError("this session has no parent: it was not spawned by agents.spawn")
        return own.parent_id, "parent"
    for child in children_of(sender_id):
        if child.name == to:
            return child.session_id, "child"
    siblings = [c for c in children_of(own.parent_id) if c.session_id != sender_id] if own else []
    for sibling in siblings:
        if sibling.name == to:
            return sibling.session_id, "sibling"
    reachable = ["parent"] if own is not None else []
    reachable += [c.name for c in children_of(sender_id)]
    reachable += [s.name for s in siblings]
    raise RoutingError(
        f"no agent named {to!r} is reachable from here (reachable: {', '.join(reachable) or 'none'}); "
        "agents further away are reached through the agent between you (ask it to relay)"
    )
