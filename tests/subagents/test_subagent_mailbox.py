"""Scoped routing (parent, children, siblings; nothing further) and inbox waiting."""

from __future__ import annotations

import asyncio

import pytest

from agent_core.subagents.mailbox import Inbox, RoutingError, resolve
from agent_core.subagents.records import ChildRecord, Message

# root -> a, b ; a -> a1
RECORDS = {
    "a": ChildRecord("a", "root", "alpha", "t", 1),
    "b": ChildRecord("b", "root", "beta", "t", 1),
    "a1": ChildRecord("a1", "a", "alpha-one", "t", 2),
}


def route(sender: str, to: str) -> tuple[str, str]:
    return resolve(
        sender,
        to,
        record_of=RECORDS.get,
        children_of=lambda parent: [r for r in RECORDS.values() if r.parent_id == parent],
    )


def test_a_child_reaches_its_parent() -> None:
    assert route("a1", "parent") == ("a", "parent")


def test_a_parent_reaches_its_direct_child_by_name() -> None:
    assert route("root", "beta") == ("b", "child")


def test_a_child_reaches_its_sibling_by_name() -> None:
    assert route("a", "beta") == ("b", "sibling")


def test_a_grandparent_cannot_address_a_grandchild_directly() -> None:
    with pytest.raises(RoutingError, match="relay"):
        route("root", "alpha-one")


def test_a_top_level_session_has_no_parent_to_write_to() -> None:
    with pytest.raises(RoutingError, match="no parent"):
        route("root", "parent")


def test_waiting_on_an_empty_inbox_times_out_with_no_messages() -> None:
    assert asyncio.run(Inbox().wait(0.05)) == []


def test_a_waiting_reader_gets_a_message_put_later_and_the_inbox_is_emptied() -> None:
    async def scenario() -> tuple[list[Message], int]:
        box = Inbox()
        reader = asyncio.create_task(box.wait(10))
        await asyncio.sleep(0)  # let the reader start waiting
        box.put(Message("alpha", "a", "root", "hello"))
        got = await asyncio.wait_for(reader, 10)
        return got, len(box)

    got, left = asyncio.run(scenario())
    assert [m.text for m in got] == ["hello"]
    assert left == 0
