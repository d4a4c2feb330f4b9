"""What `/kernel status` and `/kernel interrupt` say before a kernel runs, and a failed start."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from agent_core.kernel.handle import KernelHandle, snapshot_names

if TYPE_CHECKING:
    from kernel_bridge import KernelSession


async def _fails() -> KernelSession:
    raise RuntimeError("no such interpreter: /nope/python")


def test_status_before_the_first_cell_says_when_the_kernel_starts() -> None:
    handle = KernelHandle(_fails, label="s1")
    assert asyncio.run(handle.status("/work")) == "not started (starts with the first cell)"


def test_a_failed_start_is_reported_by_status_and_the_next_start_tries_again() -> None:
    attempts: list[int] = []

    async def factory() -> KernelSession:
        attempts.append(1)
        return await _fails()

    async def scenario() -> str:
        handle = KernelHandle(factory, label="s1")
        with pytest.raises(RuntimeError, match="no such interpreter"):
            await handle.get()
        status = await handle.status("/work")
        with pytest.raises(RuntimeError):
            await handle.get()
        return status

    assert asyncio.run(scenario()) == "failed to start: no such interpreter: /nope/python"
    assert len(attempts) == 2


def test_interrupt_without_a_running_kernel_says_there_is_nothing_to_interrupt() -> None:
    handle = KernelHandle(_fails, label="s1")
    assert asyncio.run(handle.interrupt()) == "Nothing to interrupt: the kernel is not running."


def test_the_note_for_the_next_prompt_is_given_once() -> None:
    handle = KernelHandle(_fails, label="s1")
    handle.set_note("restored: x")
    assert (handle.take_note(), handle.take_note()) == ("restored: x", None)


def test_snapshot_names_list_saved_and_skipped_names_sorted() -> None:
    assert snapshot_names(None) == "unknown (no snapshot taken yet)"
    assert snapshot_names({"saved": {"b": 1, "a": 1}, "skipped": {"conn": "socket"}}) == "a, b, conn"
    assert snapshot_names({"saved": {}, "skipped": {}}) == "none"
