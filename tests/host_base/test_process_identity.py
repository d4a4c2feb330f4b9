"""A pid's start time tells a recorded owner from a process that was given the same pid later."""

from __future__ import annotations

import os
import subprocess
import sys

from host_base.process_identity import is_same_process, pid_exists, start_time


def test_a_process_started_later_has_a_later_start_time() -> None:
    own = start_time(os.getpid())
    assert own is not None and own.isdigit()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        later = start_time(child.pid)
    finally:
        child.communicate(b"")
    assert later is not None and int(later) >= int(own)


def test_a_process_that_is_gone_has_no_start_time() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert start_time(child.pid) is None


def test_a_reused_pid_is_told_from_the_recorded_owner_by_its_start_time() -> None:
    # The pid of this process, recorded with another start time: what an owner file says after its
    # writer died and the number went to a later process.
    pid = os.getpid()
    own = start_time(pid)
    assert own is not None
    assert is_same_process(pid, own)
    assert not is_same_process(pid, str(int(own) - 1))
    assert is_same_process(pid, None)  # nothing recorded: the pid alone decides


def test_a_pid_that_is_gone_does_not_exist() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not pid_exists(child.pid)
    assert not is_same_process(child.pid, None)
    assert pid_exists(os.getpid())
