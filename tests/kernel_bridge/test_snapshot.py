"""Snapshots: per-variable pickling with skip reasons, caps, private files, safe restore."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kernel_bridge_support import wait_until

from kernel_bridge import KernelBridgeError, KernelPool, KernelSession

pytestmark = pytest.mark.anyio


@pytest.fixture
async def snap_session(pool: KernelPool, tmp_path: Path) -> AsyncIterator[KernelSession]:
    s = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "state")
    yield s
    await s.shutdown(final_snapshot=False)


async def test_round_trip_with_unpicklable_object_and_shadowed_builtins(
    pool: KernelPool, snap_session: KernelSession, tmp_path: Path
) -> None:
    code = (
        "import socket\n"
        "numbers = [1, 2, 3]\n"
        "def double(x):\n    return 2 * x\n"
        "conn = socket.socket()\n"
        "handle = open('notes.txt', 'w')\n"
        "list = 3\nopen = None\nlen = 'shadowed'\ndict = 0\n"
    )
    assert (await snap_session.execute(code).result()).status == "ok"
    manifest = await snap_session.snapshot()
    assert {"numbers", "double", "list", "open", "len", "dict"} <= set(manifest["saved"])
    assert "socket" in manifest["skipped"]["conn"]
    assert "open file" in manifest["skipped"]["handle"]

    other = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "state")
    try:
        report = await other.restore()
        assert "numbers" in report.restored and "double" in report.restored
        assert set(report.skipped) == {"conn", "handle"}
        result = await other.execute("print(numbers, double(21), list, open, len)").result()
        assert result.output == "[1, 2, 3] 42 3 None shadowed\n"
    finally:
        await other.shutdown(final_snapshot=False)


async def test_oversized_variable_is_skipped_with_reason(snap_session: KernelSession) -> None:
    await snap_session.execute("big = b'x' * (100 * 1024 * 1024)\nsmall = 'fine'").result()
    manifest = await snap_session.snapshot()
    assert "small" in manifest["saved"]
    assert "per-variable cap" in manifest["skipped"]["big"]
    paths = snap_session.snapshot_paths
    assert paths is not None and paths.state.stat().st_size < 1024 * 1024


async def test_snapshot_files_are_private(snap_session: KernelSession) -> None:
    await snap_session.execute("value = 1").result()
    await snap_session.snapshot()
    paths = snap_session.snapshot_paths
    assert paths is not None
    assert paths.state.stat().st_mode & 0o777 == 0o600
    assert paths.manifest.stat().st_mode & 0o777 == 0o600
    assert paths.directory.stat().st_mode & 0o777 == 0o700
    assert json.loads(paths.manifest.read_text())["saved"]["value"]["type"] == "int"


async def test_failed_snapshot_keeps_the_previous_good_one(snap_session: KernelSession) -> None:
    await snap_session.execute("good = 'v1'").result()
    await snap_session.snapshot()
    paths = snap_session.snapshot_paths
    assert paths is not None
    before = paths.state.read_bytes(), paths.manifest.read_bytes()
    poison = "class Poison:\n    def __reduce__(self):\n        raise KeyboardInterrupt\npoison = Poison()\ngood = 'v2'"
    await snap_session.execute(poison).result()
    with pytest.raises(KernelBridgeError, match="previous snapshot kept"):
        await snap_session.snapshot()
    assert (paths.state.read_bytes(), paths.manifest.read_bytes()) == before
    assert not [p for p in paths.directory.iterdir() if ".tmp-" in p.name]


async def test_restore_refuses_a_snapshot_others_can_write(snap_session: KernelSession) -> None:
    await snap_session.execute("secret = 1").result()
    await snap_session.snapshot()
    paths = snap_session.snapshot_paths
    assert paths is not None
    os.chmod(paths.state, 0o666)
    report = await snap_session.restore()
    assert report.restored == []
    assert "expected 0600" in report.failed["secret"]


async def test_successful_cell_triggers_a_debounced_snapshot(snap_session: KernelSession) -> None:
    await snap_session.execute("after_cell = 'auto'").result()
    paths = snap_session.snapshot_paths
    assert paths is not None

    def saved() -> bool:
        try:
            return "after_cell" in json.loads(paths.manifest.read_text())["saved"]
        except (OSError, ValueError):
            return False

    await wait_until(saved)


async def test_shutdown_takes_a_final_snapshot(pool: KernelPool, tmp_path: Path) -> None:
    s = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "final" / "kernel-state.dill")
    await s.execute("last_words = 'kept'").result()
    await s.shutdown()
    manifest = json.loads((tmp_path / "final" / "kernel-state.json").read_text())
    assert "last_words" in manifest["saved"]
    assert not s.alive


async def test_restore_without_snapshot_says_so(snap_session: KernelSession) -> None:
    report = await snap_session.restore()
    assert report.snapshot_found is False and report.restored == []


async def test_variable_beyond_the_total_cap_is_skipped_with_reason(tmp_path: Path) -> None:
    small_caps = KernelPool(0, per_variable_cap=600_000, total_cap=1_000_000)
    try:
        s = await small_caps.acquire(cwd=tmp_path, snapshot_path=tmp_path / "caps")
        await s.execute("a_first = b'a' * 500_000\nb_second = b'b' * 500_000\nc_small = 1").result()
        manifest = await s.snapshot()
        assert set(manifest["saved"]) == {"a_first", "c_small"}
        assert "total snapshot cap" in manifest["skipped"]["b_second"]
    finally:
        await small_caps.aclose()


async def test_pickling_that_raises_system_exit_only_skips_that_variable(snap_session: KernelSession) -> None:
    code = "class Quitter:\n    def __reduce__(self):\n        raise SystemExit('nope')\nq = Quitter()\nkeep_me = 5"
    await snap_session.execute(code).result()
    manifest = await snap_session.snapshot()
    assert "keep_me" in manifest["saved"]
    assert "SystemExit" in manifest["skipped"]["q"]


async def test_restore_refuses_a_symlinked_snapshot(snap_session: KernelSession, tmp_path: Path) -> None:
    await snap_session.execute("linked = 1").result()
    await snap_session.snapshot()
    paths = snap_session.snapshot_paths
    assert paths is not None
    elsewhere = tmp_path / "elsewhere.dill"
    paths.state.rename(elsewhere)
    paths.state.symlink_to(elsewhere)
    report = await snap_session.restore()
    assert report.restored == [] and "not a regular file" in report.failed["linked"]


async def test_snapshot_removes_temp_files_a_killed_kernel_left_behind(snap_session: KernelSession) -> None:
    paths = snap_session.snapshot_paths
    assert paths is not None
    paths.directory.mkdir(parents=True, exist_ok=True)
    stale = [
        paths.directory / f"{paths.state.name}.tmp-99999",
        paths.directory / f"{paths.manifest.name}.tmp-1",
    ]
    for temp in stale:
        temp.write_bytes(b"half a snapshot")
    await snap_session.execute("fresh_value = 1").result()
    manifest = await snap_session.snapshot()
    assert "fresh_value" in manifest["saved"]
    assert not [p for p in stale if p.exists()]


async def test_kernel_side_restore_rechecks_the_file_it_opens(
    snap_session: KernelSession, tmp_path: Path
) -> None:
    # The host checks the snapshot before asking the kernel to load it; the kernel checks the file
    # it actually opened too, so one swapped in between is never unpickled.
    await snap_session.execute("checked_twice = 1").result()
    await snap_session.snapshot()
    paths = snap_session.snapshot_paths
    assert paths is not None
    load = f"import _continual_acp_kernel as k\nk.restore({str(paths.state)!r})"
    os.chmod(paths.state, 0o644)
    readable = await snap_session.execute(load).result()
    assert readable.error is not None and readable.error.ename == "PermissionError"
    assert "not a private regular file" in readable.error.evalue
    os.chmod(paths.state, 0o600)
    elsewhere = tmp_path / "swapped.dill"
    paths.state.rename(elsewhere)
    paths.state.symlink_to(elsewhere)
    linked = await snap_session.execute(load).result()
    assert linked.error is not None and linked.error.ename == "OSError"
    assert "symbolic links" in linked.error.evalue


async def test_a_value_that_failed_to_restore_is_kept_by_later_snapshots(
    snap_session: KernelSession, tmp_path: Path
) -> None:
    module = tmp_path / "shapes_mod.py"
    module.write_text("class Shape:\n    sides = 4\n")
    await snap_session.execute("import shapes_mod\nsquare = shapes_mod.Shape()").result()
    await snap_session.snapshot()
    module.unlink()  # the class cannot be imported by the next kernel
    report = await snap_session.restart()
    assert "square" in report and "Failed to restore" in report
    await snap_session.execute("unrelated = 1").result()
    manifest = await snap_session.snapshot()
    assert "square" in manifest["saved"], "a later snapshot must not drop what it could not restore"
    module.write_text("class Shape:\n    sides = 4\n")
    await snap_session.restart()
    result = await snap_session.execute("print(square.sides, unrelated)").result()
    assert result.output == "4 1\n"
