"""Shared fixtures: real kernels, shared per module where a test does not kill or restart them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kernel_bridge import KernelPool, KernelSession


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
