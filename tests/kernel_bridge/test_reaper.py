"""The process-group reaper never signals anything but a real kernel process group."""

from __future__ import annotations

import os
import signal

import pytest

from kernel_bridge import reaper


@pytest.mark.parametrize("pid", [0, -1])
def test_kill_group_ignores_pids_that_are_not_a_process(monkeypatch: pytest.MonkeyPatch, pid: int) -> None:
    # kill(-1) would signal every process of this user and kill(0) the server's own group.
    sent: list[tuple[str, int, int]] = []
    monkeypatch.setattr(os, "kill", lambda p, s: sent.append(("kill", p, s)))
    monkeypatch.setattr(os, "killpg", lambda p, s: sent.append(("killpg", p, s)))
    reaper.track(pid)
    reaper.kill_group(pid)
    assert sent == []
    assert pid not in reaper._groups


def test_kill_group_signals_the_tracked_group(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda p, s: sent.append((p, s)))
    monkeypatch.setattr(os, "getpgid", lambda p: 424242)
    reaper.track(4242)
    try:
        reaper.kill_group(4242)
    finally:
        reaper.forget(4242)
    assert sent == [(424242, signal.SIGKILL)]
