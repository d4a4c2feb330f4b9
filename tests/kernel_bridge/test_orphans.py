"""No orphans: killing the server process (SIGTERM or SIGKILL) leaves no kernel process alive."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kernel_bridge_support import process_gone

from kernel_bridge import group_watch

HOST = Path(__file__).with_name("orphan_host.py")


def _start_host() -> tuple[subprocess.Popen[str], int, int, str]:
    host = subprocess.Popen(
        [sys.executable, str(HOST)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert host.stdout is not None
    line = host.stdout.readline()  # blocks until the host has a running kernel
    if not line:
        host.kill()
        raise AssertionError(f"host script failed: {host.stderr.read() if host.stderr else ''}")
    kernel_pid, child_pid, runtime_dir = line.split()
    return host, int(kernel_pid), int(child_pid), runtime_dir


def _kernels_started_in(runtime_dir: str) -> list[int]:
    """Live processes whose command line names a file in `runtime_dir`: its kernels, and the kernel
    template they were forked from (all run its launch file)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if runtime_dir in cmdline and not process_gone(int(entry.name)):
            found.append(int(entry.name))
    return found


def _forked_kernels(runtime_dir: str, kernel_pid: int) -> tuple[int, list[int]]:
    """The kernel template (the parent of `kernel_pid`) and the kernels beside it."""
    stat = Path(f"/proc/{kernel_pid}/stat").read_text()
    template = int(stat.rsplit(")", 1)[1].split()[1])
    processes = _kernels_started_in(runtime_dir)
    assert template in processes, f"kernel {kernel_pid} was not forked from the template: {processes}"
    return template, [pid for pid in processes if pid != template]


def _wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)  # polling a condition with a deadline
    return condition()


def _wait_gone(pid: int, timeout: float = 20.0) -> bool:
    return _wait_until(lambda: process_gone(pid), timeout)


@pytest.fixture
def cleanup() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:  # never leave strays behind even when an assertion failed
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def cleanup_dirs() -> Iterator[list[Path]]:
    dirs: list[Path] = []
    yield dirs
    for directory in dirs:
        shutil.rmtree(directory, ignore_errors=True)


def test_sigterm_of_the_server_kills_every_kernel_and_their_children(cleanup: list[int]) -> None:
    host, kernel_pid, child_pid, runtime_dir = _start_host()
    template, kernels = _forked_kernels(runtime_dir, kernel_pid)
    assert kernel_pid in kernels and len(kernels) == 2, f"expected session + warm kernel, saw {kernels}"
    cleanup.extend([template, *kernels, child_pid])
    host.send_signal(signal.SIGTERM)
    assert host.wait(timeout=30) == -signal.SIGTERM
    assert _wait_until(lambda: not _kernels_started_in(runtime_dir)), (
        "a kernel (or the template) survived SIGTERM"
    )
    assert _wait_gone(child_pid), f"kernel child {child_pid} survived SIGTERM of the server"
    assert not Path(runtime_dir).exists(), "SIGTERM left the runtime dir (connection files) behind"


def test_sigkill_of_the_server_ends_every_kernel_and_their_children(
    cleanup: list[int], cleanup_dirs: list[Path]
) -> None:
    host, kernel_pid, child_pid, runtime_dir = _start_host()
    template, kernels = _forked_kernels(runtime_dir, kernel_pid)
    assert kernel_pid in kernels and len(kernels) == 2, f"expected session + warm kernel, saw {kernels}"
    cleanup.extend([template, *kernels, child_pid])
    for kernel in [template, *kernels]:  # each runs kernel_bridge's group watch, embedded in its launch code
        argv = Path(f"/proc/{kernel}/cmdline").read_bytes().decode().split("\0")
        launch = next(a for a in argv if a.endswith("continual_acp_ipykernel.py"))
        assert Path(launch).read_text().startswith(group_watch.embeddable_source())
    host.kill()
    host.wait(timeout=30)
    cleanup_dirs.append(Path(runtime_dir))  # nothing in the server runs after SIGKILL
    # Nothing in the server runs after SIGKILL: each kernel's parent watch kills its process group.
    assert _wait_until(lambda: not _kernels_started_in(runtime_dir)), (
        "a kernel (or the template) survived SIGKILL"
    )
    assert _wait_gone(child_pid), f"kernel child {child_pid} survived SIGKILL of the server"
