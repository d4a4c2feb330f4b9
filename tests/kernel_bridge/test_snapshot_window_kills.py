"""A kernel killed at any moment around a snapshot never fails the user's next cell.

Real SIGKILLs of a real kernel, in a bounded loop: right after a cell, while the background
snapshot holds the session (the window the defect was found in), and right after the snapshot.
Whatever the moment, the next cell runs on a ready replacement and succeeds.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kernel_bridge_support import wait_until

from kernel_bridge import KernelPool, KernelSession

pytestmark = pytest.mark.anyio

ROUNDS = 4


@pytest.fixture
async def snapshotting(tmp_path: Path) -> AsyncIterator[KernelSession]:
    pool = KernelPool(0, snapshot_debounce=0.01, interrupt_grace=1.0)
    await pool.start()
    session = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "state", output_dir=tmp_path / "out")
    try:
        yield session
    finally:
        await session.shutdown(final_snapshot=False)
        await pool.aclose()


def _kill(session: KernelSession) -> int:
    pid = session.kernel_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    return pid


def _snapshot_began(session: KernelSession, before: object) -> bool:
    return session._lock.locked() or session.last_snapshot is not before


def _snapshot_done(session: KernelSession, before: object) -> bool:
    return session.last_snapshot is not before and not session._lock.locked()


async def _next_cell_succeeds(session: KernelSession, killed: int, marker: int) -> tuple[str, str, bool]:
    result = await session.execute(f"print('next {marker}')").result()
    return result.status, result.output, session.kernel_pid != killed


async def test_a_kill_right_after_a_cell_never_fails_the_next_cell(snapshotting: KernelSession) -> None:
    for round_ in range(ROUNDS):
        assert (await snapshotting.execute(f"v{round_} = {round_}").result()).status == "ok"
        killed = _kill(snapshotting)
        assert await _next_cell_succeeds(snapshotting, killed, round_) == ("ok", f"next {round_}\n", True)


async def test_a_kill_while_the_background_snapshot_runs_never_fails_the_next_cell(
    snapshotting: KernelSession,
) -> None:
    for round_ in range(ROUNDS):
        before = snapshotting.last_snapshot
        assert (await snapshotting.execute(f"v{round_} = {round_}").result()).status == "ok"
        # The debounced snapshot takes the session's lock: kill inside that window.
        await wait_until(functools.partial(_snapshot_began, snapshotting, before))
        killed = _kill(snapshotting)
        assert await _next_cell_succeeds(snapshotting, killed, round_) == ("ok", f"next {round_}\n", True)


async def test_a_kill_right_after_the_background_snapshot_never_fails_the_next_cell(
    snapshotting: KernelSession,
) -> None:
    for round_ in range(ROUNDS):
        before = snapshotting.last_snapshot
        assert (await snapshotting.execute(f"v{round_} = {round_}").result()).status == "ok"
        await wait_until(functools.partial(_snapshot_done, snapshotting, before))
        killed = _kill(snapshotting)
        assert await _next_cell_succeeds(snapshotting, killed, round_) == ("ok", f"next {round_}\n", True)
