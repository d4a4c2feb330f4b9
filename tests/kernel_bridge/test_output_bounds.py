"""Full cell output on disk is bounded per cell (head and tail kept) and per session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel_bridge import KernelPool, KernelSession

pytestmark = pytest.mark.anyio

FILE_CHARS = 10_000
SESSION_BYTES = 30_000


@pytest.fixture
async def bounded(tmp_path: Path) -> AsyncIterator[KernelSession]:
    pool = KernelPool(0, max_file_chars=FILE_CHARS, max_session_output_bytes=SESSION_BYTES)
    await pool.start()
    session = await pool.acquire(cwd=tmp_path, output_dir=tmp_path / "cells", max_output_chars=2_000)
    try:
        yield session
    finally:
        await session.shutdown(final_snapshot=False)
        await pool.aclose()


async def test_a_cell_printing_far_past_the_file_cap_keeps_head_and_tail_within_the_cap(
    bounded: KernelSession,
) -> None:
    result = await bounded.execute("print('HEAD' + 'x' * 500_000 + 'TAIL')").result()
    assert result.full_output_path is not None
    saved = result.full_output_path.read_text(encoding="utf-8")
    assert (saved.startswith("HEAD"), saved.rstrip().endswith("TAIL"), "characters omitted" in saved) == (
        True,
        True,
        True,
    )
    assert len(saved) < FILE_CHARS + 200


async def test_a_sessions_cell_files_stay_under_the_session_cap_and_the_newest_is_kept(
    bounded: KernelSession, tmp_path: Path
) -> None:
    paths = []
    for index in range(8):
        result = await bounded.execute(f"print('{index}' * 9_000)").result()
        assert result.full_output_path is not None
        paths.append(result.full_output_path)
    files = sorted((tmp_path / "cells").glob("cell-*.txt"))
    total = sum(p.stat().st_size for p in files)
    assert total <= SESSION_BYTES + FILE_CHARS and paths[-1] in files and paths[0] not in files
