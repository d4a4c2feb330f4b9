"""Shared fixtures: real kernels, shared per module where a test does not kill or restart them."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from kernel_bridge import KernelPool, KernelSession


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    # jupyter_client's async client is zmq.asyncio: kernel_bridge runs on asyncio.
    return "asyncio"


async def wait_until(predicate: Callable[[], bool | Awaitable[bool]], timeout: float = 20.0) -> None:
    """Poll `predicate` until it holds; fail with a clear message after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if not isinstance(value, bool):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await anyio.sleep(0.05)


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


@pytest.fixture(scope="module")
async def pool(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelPool]:
    """A pool of size 0: the module's sessions cold-start; nothing warms in the background."""
    p = KernelPool(0, snapshot_debounce=0.2, interrupt_grace=1.0)
    await p.start()
    yield p
    await p.aclose()


@pytest.fixture(scope="module")
async def session(pool: KernelPool, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelSession]:
    """One kernel shared by the read-only tests of a module."""
    base = tmp_path_factory.mktemp("session")
    s = await pool.acquire(cwd=base, output_dir=base / "out", max_output_chars=2_000)
    yield s
    await s.shutdown(final_snapshot=False)
