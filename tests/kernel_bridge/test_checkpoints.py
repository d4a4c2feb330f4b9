"""Per-prompt checkpoints in a real kernel: unchanged values are reused, changed ones (directly, through
an alias or a user function) are pickled again, a restore loads only what differs and removes later
names, and the store stays within its bounds.

One kernel for the module; each test uses its own checkpoint labels and resets the namespace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel_bridge import KernelPool, KernelSession
from kernel_bridge.checkpoints import CheckpointBounds, export_snapshot
from kernel_bridge.snapshot import SnapshotPaths

pytestmark = pytest.mark.anyio
WIDE = CheckpointBounds(max_count=100, max_bytes=1 << 30)


@pytest.fixture(scope="module")
async def kernel(pool: KernelPool, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelSession]:
    base = tmp_path_factory.mktemp("checkpoints")
    s = await pool.acquire(cwd=base, snapshot_path=base / "state")
    yield s
    await s.shutdown(final_snapshot=False)


async def run(kernel: KernelSession, code: str) -> str:
    result = await kernel.execute(code).result()
    assert result.status == "ok", result.output
    return result.output


async def fresh(kernel: KernelSession) -> None:
    await run(kernel, "%reset -f")


async def test_an_untouched_value_is_reused_and_a_changed_one_is_pickled_again(kernel: KernelSession) -> None:
    await fresh(kernel)
    await run(kernel, "big = bytes(5_000_000)\nsmall = [1]")
    first = await kernel.checkpoint("reuse-1", WIDE)
    assert first["pickled"] == 2 and first["reused"] == 0
    await run(kernel, "small.append(2)")
    second = await kernel.checkpoint("reuse-2", WIDE)
    assert (second["pickled"], second["reused"], second["written"] < 1000) == (1, 1, True), second


async def test_a_value_changed_through_an_alias_or_a_user_function_is_pickled_again(
    kernel: KernelSession,
) -> None:
    await fresh(kernel)
    await run(kernel, "data = [1]\nalias = data\ndef grow():\n    data.append(len(data))\nother = {'k': 1}")
    await kernel.checkpoint("indirect-1", WIDE)
    await run(kernel, "alias.append(9)")
    via_alias = await kernel.checkpoint("indirect-2", WIDE)
    assert via_alias["pickled"] == 2 and via_alias["reused"] == 2, via_alias  # data and alias
    await run(kernel, "grow()")
    via_function = await kernel.checkpoint("indirect-3", WIDE)
    assert via_function["pickled"] == 3 and via_function["reused"] == 1, via_function  # not `other`
    await run(kernel, "exec('other[\"k\"] = 2')")
    opaque = await kernel.checkpoint("indirect-4", WIDE)
    assert opaque["reused"] == 0, opaque


async def test_restore_loads_what_differs_removes_later_names_and_keeps_the_rest(
    kernel: KernelSession,
) -> None:
    await fresh(kernel)
    await run(kernel, "kept = bytes(1000)\ncounter = 1")
    await kernel.checkpoint("restore-1", WIDE)
    await run(kernel, "counter = 2\nlater = 'new'")
    await kernel.checkpoint("restore-2", WIDE)
    back = await kernel.restore_checkpoint("restore-1")
    assert (back["restored"], back["unchanged"], back["removed"]) == (["counter"], ["kept"], ["later"]), back
    assert "1 False" in await run(kernel, "print(counter, 'later' in dir())")
    forward = await kernel.restore_checkpoint("restore-2")
    assert sorted(forward["restored"]) == ["counter", "later"] and forward["unchanged"] == ["kept"], forward
    assert "2 new" in await run(kernel, "print(counter, later)")


async def test_the_store_drops_the_oldest_checkpoints_past_its_count_and_byte_bounds(
    kernel: KernelSession, tmp_path: Path
) -> None:
    await fresh(kernel)
    for i in range(4):
        await run(kernel, f"value = bytes({200_000 + i})")
        summary = await kernel.checkpoint(f"bound-{i}", CheckpointBounds(max_count=2, max_bytes=1 << 30))
    assert summary["kept"][-2:] == ["bound-2", "bound-3"] and "bound-1" not in summary["kept"], summary
    await run(kernel, "value = bytes(300_000)")
    tight = await kernel.checkpoint("bound-4", CheckpointBounds(max_count=100, max_bytes=350_000))
    assert tight["kept"] == ["bound-4"] and tight["storeBytes"] < 350_000, tight
    directory = kernel.checkpoint_dir
    assert directory is not None
    assert len(list((directory / "blobs").iterdir())) == 1  # the dropped checkpoints' values are gone


async def test_a_checkpoint_exported_as_a_snapshot_restores_in_another_kernel(
    kernel: KernelSession, pool: KernelPool, tmp_path: Path
) -> None:
    await fresh(kernel)
    await run(kernel, "exported = {'a': [1, 2]}")
    await kernel.checkpoint("export-1", WIDE)
    assert kernel.checkpoint_dir is not None
    names = export_snapshot(kernel.checkpoint_dir, "export-1", SnapshotPaths.at(tmp_path / "fork"))
    assert names == ["exported"]
    other = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "fork")
    try:
        report = await other.restore()
        assert report.restored == ["exported"]
        assert "[1, 2]" in await run(other, "print(exported['a'])")
    finally:
        await other.shutdown(final_snapshot=False)
