"""A pid's start time tells a recorded owner from a process that was given the same pid later."""

from __future__ import annotations

import os
import subprocess
import sys

from kernel_bridge.process_identity import start_time


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
