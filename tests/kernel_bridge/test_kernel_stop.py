"""How a kernel stops: its own exit wakes the wait for it (kernel_manager.py), and a cell's
subprocess that nothing waited for does not hold the polite shutdown until the kernel is killed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_bridge import KernelPool
from kernel_bridge.kernel_manager import wait_for_exit

pytestmark = pytest.mark.anyio


def _gone(pid: int) -> bool:
    """Whether `pid` has ended (a zombie nobody reaped yet counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def test_a_kernel_whose_cell_left_a_subprocess_exits_by_itself_at_shutdown(tmp_path: Path) -> None:
    """ipykernel signals the kernel's children until none is left; the cell's child, ended by that
    signal and never waited for, stayed listed as a zombie, and the server killed the kernel after
    its grace (exit code -15). Reaped, the kernel exits with 0 and takes its child with it."""
    pool = KernelPool(0)
    await pool.start()
    try:
        session = await pool.acquire(cwd=tmp_path, output_dir=tmp_path / "out")
        result = await session.execute(
            "import subprocess\nchild = subprocess.Popen(['sleep', '60'])\nprint(child.pid)"
        ).result()
        assert result.status == "ok", result
        child = int(result.output.strip())
        kernel = session._kernel
        assert kernel is not None and kernel.km is not None
        process = kernel.km.provisioner.process  # type: ignore[union-attr]
        await session.shutdown(final_snapshot=False)
        assert process.returncode == 0
        assert _gone(child)
    finally:
        await pool.aclose()


async def test_the_wait_for_a_process_wakes_when_it_exits() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        waiting = asyncio.ensure_future(wait_for_exit(process))
        await asyncio.sleep(0)
        assert not waiting.done()
        assert process.stdin is not None
        process.stdin.close()  # the child reads EOF and exits
        assert await asyncio.wait_for(waiting, 30) is True
        assert process.wait(10) == 0
    finally:
        process.kill()
        process.wait()


async def test_a_reaped_process_is_not_waited_on_by_its_pid() -> None:
    """Once reaped its pid may be another process's: no pidfd is opened for it."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(30)
    assert await wait_for_exit(process) is False
    assert await wait_for_exit(None) is False
