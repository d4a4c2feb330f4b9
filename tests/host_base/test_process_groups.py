"""Killing a process group ends a command and what it started (host_base.process_groups)."""

from __future__ import annotations

import os
import select
import subprocess
import sys

import pytest

from host_base.process_groups import kill_and_reap, kill_group

# The child starts a grandchild, says its pid, and both block on the stdin pipe the test holds open:
# neither ends unless killed.
_CHILD = (
    "import subprocess, sys\n"
    "g = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'])\n"
    "print(g.pid, flush=True)\n"
    "sys.stdin.read()\n"
)


def _exited(pid_fd: int, timeout: float) -> bool:
    """True once the process behind `pid_fd` has exited (a pidfd turns readable then)."""
    readable, _, _ = select.select([pid_fd], [], [], timeout)
    return bool(readable)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs pidfd_open (Linux)")
def test_a_group_kill_reaps_the_child_and_ends_its_grandchild() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        grandchild_fd = os.pidfd_open(grandchild)
        try:
            assert os.getpgid(grandchild) == child.pid  # it is in the child's group
            status = kill_and_reap(child)
            assert status == -9  # SIGKILL, and waited for: the child is reaped
            assert child.returncode == -9
            assert _exited(grandchild_fd, 30.0), "the grandchild outlived the group kill"
        finally:
            os.close(grandchild_fd)
    finally:
        if child.returncode is None:
            child.kill()
            child.wait()
        assert child.stdin is not None and child.stdout is not None
        child.stdin.close()
        child.stdout.close()


def test_killing_a_group_that_is_gone_is_no_error() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    child.wait()
    kill_group(child.pid)  # nothing left: no ProcessLookupError


@pytest.mark.parametrize("pgid", [0, 1, -1])
def test_the_callers_own_group_init_and_every_process_are_refused(pgid: int) -> None:
    with pytest.raises(ValueError):
        kill_group(pgid)
