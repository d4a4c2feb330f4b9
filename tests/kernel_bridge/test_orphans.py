"""No orphans: killing the server process (SIGTERM or SIGKILL) leaves no kernel process alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_bridge_support import process_gone

HOST = Path(__file__).with_name("orphan_host.py")


def _start_host() -> tuple[subprocess.Popen[str], int, int]:
    host = subprocess.Popen(
        [sys.executable, str(HOST)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert host.stdout is not None
    line = host.stdout.readline()  # blocks until the host has a running kernel
    if not line:
        host.kill()
        raise AssertionError(f"host script failed: {host.stderr.read() if host.stderr else ''}")
    kernel_pid, child_pid = (int(part) for part in line.split())
    return host, kernel_pid, child_pid


def _wait_gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.05)  # polling a condition with a deadline
    return process_gone(pid)


@pytest.fixture
def cleanup() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:  # never leave strays behind even when an assertion failed
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_sigterm_of_the_server_kills_the_kernel_and_its_children(cleanup: list[int]) -> None:
    host, kernel_pid, child_pid = _start_host()
    cleanup.extend([kernel_pid, child_pid])
    host.send_signal(signal.SIGTERM)
    assert host.wait(timeout=30) == -signal.SIGTERM
    assert _wait_gone(kernel_pid), f"kernel {kernel_pid} survived SIGTERM of its server"
    assert _wait_gone(child_pid), f"kernel child {child_pid} survived SIGTERM of the server"


def test_sigkill_of_the_server_still_ends_the_kernel(cleanup: list[int]) -> None:
    host, kernel_pid, child_pid = _start_host()
    cleanup.extend([kernel_pid, child_pid])
    host.kill()
    host.wait(timeout=30)
    # Nothing in the server runs after SIGKILL: ipykernel's parent-pid watch ends the kernel.
    assert _wait_gone(kernel_pid), f"kernel {kernel_pid} survived SIGKILL of its server"
