"""Reopening a session whose owner was killed while one of its children was between fork and exec:
that child holds a copy of the owner lock for a moment after the owner is gone. The reopen waits for
it (without blocking the event loop); a live owner is still refused at once."""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_core.errors import SessionInUse
from agent_core.history.ownership import LOCK_FILE, acquire_when_owner_gone

pytestmark = pytest.mark.anyio


def _held_by_a_child(directory: Path, owner_pid: int) -> subprocess.Popen[bytes]:
    """The lock taken and named for `owner_pid`, then left to a child that shares it (as a forked,
    not yet exec'd child shares its parent's); the child lets go when its stdin closes."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, f"{owner_pid}\n".encode(), 0)
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, pass_fds=(fd,)
    )
    os.close(fd)  # the child's copy is the only one left
    return child


async def test_a_dead_owners_lock_still_held_by_its_child_is_taken_once_the_child_lets_go(
    tmp_path: Path,
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(30)
    child = _held_by_a_child(tmp_path, dead.pid)
    try:
        waiting = asyncio.ensure_future(acquire_when_owner_gone(tmp_path, "s1"))
        await asyncio.sleep(0)  # its first attempt found the lock held
        assert not waiting.done()
        assert child.stdin is not None
        child.stdin.close()
        owner = await asyncio.wait_for(waiting, 10)
        assert owner.held
        owner.release()
    finally:
        child.kill()
        child.wait()


async def test_a_live_owner_is_refused_at_once(tmp_path: Path) -> None:
    child = _held_by_a_child(tmp_path, os.getppid())  # a running process is named as the owner
    try:
        with pytest.raises(SessionInUse) as refused:
            await asyncio.wait_for(acquire_when_owner_gone(tmp_path, "s2"), 0.5)
        assert refused.value.pid == os.getppid()
    finally:
        child.kill()
        child.wait()
