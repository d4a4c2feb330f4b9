"""Interrupts, timeouts and dead kernels: each ends the cell clearly and the session recovers."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kernel_bridge_support import process_gone, wait_until

from kernel_bridge import KernelPool, KernelSession, SessionClosed
from kernel_bridge.launcher import LaunchSpec, RunningKernel, start_local_kernel

pytestmark = pytest.mark.anyio


@pytest.fixture
async def fresh(pool: KernelPool, tmp_path: Path) -> AsyncIterator[KernelSession]:
    """A session of its own (these tests kill and restart kernels), with snapshots on."""
    s = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "state", output_dir=tmp_path / "out")
    yield s
    await s.shutdown(final_snapshot=False)


async def test_interrupt_of_sleep_returns_well_under_the_grace_period(fresh: KernelSession) -> None:
    await fresh.execute("kept = 'still here'").result()
    run = fresh.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(60)")
    await anext(run)  # the cell is running once its first output arrives
    started = time.monotonic()
    await fresh.interrupt()
    result = await run.result()
    elapsed = time.monotonic() - started
    assert result.status == "interrupted"
    assert result.error is not None and result.error.ename == "KeyboardInterrupt"
    assert elapsed < fresh.options.interrupt_grace
    after = await fresh.execute("print(kept)").result()
    assert after.output == "still here\n" and after.report is None


async def test_cell_ignoring_sigint_leads_to_restart_with_report(fresh: KernelSession) -> None:
    await fresh.execute("saved = [1, 2, 3]").result()
    await fresh.snapshot()
    await fresh.execute("unsaved = 'gone'").result()
    old_pid = fresh.kernel_pid
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('stubborn', flush=True)\ntime.sleep(60)"
    run = fresh.execute(code)
    await anext(run)  # the cell is running once its first output arrives
    await fresh.interrupt()
    result = await run.result()
    assert result.status == "interrupted"
    assert result.error is not None and "did not stop within" in result.error.evalue
    assert old_pid is not None
    await wait_until(lambda: process_gone(old_pid))
    after = await fresh.execute("print(saved)").result()
    assert after.output == "[1, 2, 3]\n"
    assert fresh.kernel_pid != old_pid
    assert after.report is not None
    assert "saved" in after.report and "Lost" in after.report and "unsaved" in after.report


async def test_timeout_interrupts_the_cell(fresh: KernelSession) -> None:
    result = await fresh.execute("import time\ntime.sleep(60)", timeout=0.5).result()
    assert result.status == "interrupted"
    assert "timed out after 0.5 s" in result.output
    assert result.duration < 10


async def test_os_exit_in_a_cell_fails_it_and_next_cell_gets_fresh_kernel_with_snapshot(
    fresh: KernelSession,
) -> None:
    await fresh.execute("survivor = {'a': 1}").result()
    await fresh.snapshot()
    old_pid = fresh.kernel_pid
    result = await fresh.execute("import os\nos._exit(1)").result()
    assert result.status == "died"
    assert result.error is not None and result.error.ename == "KernelDied"
    assert "kernel died" in result.output
    after = await fresh.execute("print(survivor)").result()
    assert after.status == "ok" and after.output == "{'a': 1}\n"
    assert fresh.kernel_pid != old_pid and fresh.alive
    assert after.report is not None and "survivor" in after.report


async def test_kernel_killed_from_outside_fails_running_cell(fresh: KernelSession) -> None:
    run = fresh.execute("import time\nprint('up', flush=True)\ntime.sleep(60)")
    await anext(run)  # the cell is running once its first output arrives
    pid = fresh.kernel_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    result = await run.result()
    assert result.status == "died"
    assert "exit code" in result.output
    after = await fresh.execute("print('alive again')").result()
    assert after.output == "alive again\n" and after.report is not None


async def test_interrupt_drops_cells_that_have_not_started(fresh: KernelSession) -> None:
    running = fresh.execute("import time\nprint('go', flush=True)\ntime.sleep(60)")
    queued = fresh.execute("marker = 'ran'")
    await anext(running)  # the cell is running once its first output arrives
    await fresh.interrupt()
    assert (await queued.result()).status == "interrupted"
    check = await fresh.execute("print('marker' in globals())").result()
    assert check.output == "False\n"


async def test_restart_restores_state_and_reports_it(fresh: KernelSession) -> None:
    await fresh.execute("kept_over_restart = 7").result()
    old_pid = fresh.kernel_pid
    report = await fresh.restart()
    assert fresh.kernel_pid != old_pid
    assert "kept_over_restart" in report and "restart requested" in report
    assert (await fresh.execute("print(kept_over_restart)").result()).output == "7\n"


async def test_restart_without_restore_starts_empty(fresh: KernelSession) -> None:
    await fresh.execute("temporary = 1").result()
    report = await fresh.restart(restore=False)
    assert "temporary" in report and "lost" in report.lower()
    result = await fresh.execute("print('temporary' in globals())").result()
    assert result.output == "False\n"


async def test_interrupt_with_nothing_running_is_harmless(fresh: KernelSession) -> None:
    await fresh.interrupt()
    assert (await fresh.execute("print('fine')").result()).output == "fine\n"


async def test_execute_after_shutdown_raises_session_closed(pool: KernelPool, tmp_path: Path) -> None:
    s = await pool.acquire(cwd=tmp_path)
    await s.shutdown()
    with pytest.raises(SessionClosed, match="shut down"):
        s.execute("1")


_DROP_IDLE = """
import ipykernel.kernelbase as kernelbase

_publish = kernelbase.Kernel._publish_status


def _publish_status(self, status, channel, parent=None):
    # A deliberately broken kernel: it never reports idle for cells marked "# drop-idle".
    target = parent or self.get_parent(channel)
    code = (target or {}).get("content", {}).get("code", "")
    if status == "idle" and "# drop-idle" in code:
        return None
    return _publish(self, status, channel, parent)


kernelbase.Kernel._publish_status = _publish_status
"""


async def test_cell_whose_idle_status_never_arrives_still_finishes(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_DROP_IDLE)
    wrapper = tmp_path / "python-dropping-idle"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}:$PYTHONPATH" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    broken = KernelPool(0, python=wrapper)
    try:
        s = await broken.acquire(cwd=tmp_path)
        result = await s.execute("print('before')  # drop-idle").result()
        assert result.status == "ok"
        assert result.output.startswith("before\n")
        assert "output of this cell may be missing" in result.output
        assert (await s.execute("print('next')").result()).output == "next\n"
    finally:
        await broken.aclose()


async def test_shutdown_while_a_dead_kernel_is_being_replaced_leaves_no_kernel(tmp_path: Path) -> None:
    launched: list[RunningKernel] = []
    replacing = asyncio.Event()
    release = asyncio.Event()

    async def gated_launcher(spec: LaunchSpec) -> RunningKernel:
        if launched:  # the replacement of the dead kernel: hold it until shutdown has begun
            replacing.set()
            await release.wait()
        kernel = await start_local_kernel(spec)
        launched.append(kernel)
        return kernel

    pool = KernelPool(0, launcher=gated_launcher)
    try:
        s = await pool.acquire(cwd=tmp_path)
        assert (await s.execute("import os\nos._exit(1)").result()).status == "died"
        await asyncio.wait_for(replacing.wait(), 20)
        closing = asyncio.ensure_future(s.shutdown(final_snapshot=False))
        await wait_until(lambda: s.closed)
        release.set()
        await asyncio.wait_for(closing, 60)
        assert len(launched) == 2, "the replacement kernel was started"
        for kernel in launched:
            await wait_until(lambda kernel=kernel: process_gone(kernel.pid))
    finally:
        release.set()
        await pool.aclose()


async def test_a_frozen_kernel_is_detected_by_its_heartbeat_and_replaced(tmp_path: Path) -> None:
    pool = KernelPool(0, heartbeat_timeout=1.0)
    frozen: int | None = None
    try:
        s = await pool.acquire(cwd=tmp_path)
        run = s.execute("import time\nprint('up', flush=True)\ntime.sleep(60)")
        await anext(run)  # the cell is running once its first output arrives
        frozen = s.kernel_pid
        assert frozen is not None
        os.kill(frozen, signal.SIGSTOP)  # the process lives on, the kernel (and its heartbeat) stops
        result = await asyncio.wait_for(run.result(), 60)
        assert result.status == "died"
        assert "no heartbeat for 1 s" in result.output
        await wait_until(lambda: process_gone(frozen))
        after = await s.execute("print('fresh')").result()
        assert after.output == "fresh\n" and after.report is not None
    finally:
        if frozen is not None and not process_gone(frozen):
            os.kill(frozen, signal.SIGKILL)
        await pool.aclose()
