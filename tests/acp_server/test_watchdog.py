"""acp_server/process/watchdog.py in-process: a stalled loop's stack is logged once per stall and its length
kept; a server whose editor left is forced out (children killed first) only when its loop is stuck."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import pytest

from acp_server.process.watchdog import FORCED_EXIT_CODE, Watchdog

SETTLE = 30.0  # generous bound for something that must happen


class _Exit:
    """Stands in for os._exit: records the code and what was killed first."""

    def __init__(self) -> None:
        self.code: int | None = None
        self.killed_first = False
        self.children_killed = False
        self.done = threading.Event()

    def kill_children(self) -> None:
        self.children_killed = True

    def __call__(self, code: int) -> None:
        self.code = code
        self.killed_first = self.children_killed
        self.done.set()


def _block_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)  # the deliberate blocking call on the loop under test


def test_a_stalled_loop_logs_its_stack_once_and_the_worst_stall_is_kept(
    capfd: pytest.CaptureFixture[str],
) -> None:
    watchdog = Watchdog(stall_seconds=0.3, grace_seconds=100.0)

    async def main() -> None:
        watchdog.start()
        asyncio.get_running_loop().call_soon(watchdog.heartbeat)
        await asyncio.sleep(0.05)
        _block_the_loop_for(1.5)  # five thresholds long: still one report
        await asyncio.sleep(0.05)

    try:
        asyncio.run(main())
    finally:
        watchdog.stop()
    err = capfd.readouterr().err
    assert err.count("the event loop has not turned") == 1
    assert "_block_the_loop_for" in err
    assert watchdog.worst_stall() >= 1.5
    assert (
        "worst stall" in watchdog.status_line() and "over the 0.3 s stall threshold" in watchdog.status_line()
    )


def test_a_stuck_server_whose_input_ended_kills_its_children_then_exits() -> None:
    exit = _Exit()
    watchdog = Watchdog(stall_seconds=100.0, grace_seconds=0.3, kill_children=exit.kill_children, exit=exit)
    watchdog.start()  # never petted again: the loop is stuck
    try:
        watchdog.input_ended()
        assert exit.done.wait(SETTLE)
    finally:
        watchdog.stop()
    assert exit.code == FORCED_EXIT_CODE
    assert exit.killed_first


def test_a_loop_that_still_turns_finishes_its_own_shutdown_without_being_forced() -> None:
    exit = _Exit()
    watchdog = Watchdog(stall_seconds=100.0, grace_seconds=0.3, kill_children=exit.kill_children, exit=exit)
    watchdog.start()
    stop = threading.Event()

    def turning() -> None:
        while not stop.wait(0.05):
            watchdog.pet()

    petter = threading.Thread(target=turning, daemon=True)
    petter.start()
    try:
        watchdog.input_ended()
        assert not exit.done.wait(2.0)  # several graces: the orderly path has its own bounds
    finally:
        stop.set()
        petter.join()
        watchdog.stop()
    assert exit.code is None


def test_stdin_closing_is_seen_without_the_loop() -> None:
    read_end, write_end = os.pipe()
    exit = _Exit()
    watchdog = Watchdog(
        stall_seconds=100.0, grace_seconds=0.3, input_fd=read_end, kill_children=exit.kill_children, exit=exit
    )
    watchdog.start()
    try:
        os.write(write_end, b'{"unread": "data"}\n')  # waiting data is the transport's, not a hang-up
        assert not exit.done.wait(1.0)
        os.close(write_end)
        assert exit.done.wait(SETTLE)
    finally:
        watchdog.stop()
        os.close(read_end)
    assert exit.code == FORCED_EXIT_CODE


def test_the_stall_report_holds_the_worst_stall_and_the_stack_that_caused_it(tmp_path: Path) -> None:
    watchdog = Watchdog(stall_seconds=100.0, grace_seconds=100.0, report_dir=str(tmp_path))

    async def main() -> None:
        watchdog.start()
        asyncio.get_running_loop().call_soon(watchdog.heartbeat)
        await asyncio.sleep(0.05)
        _block_the_loop_for(1.0)  # two stack points long: the thread takes the stack during it
        await asyncio.sleep(0.05)

    try:
        asyncio.run(main())
    finally:
        watchdog.stop()  # writes the report
    report = json.loads((tmp_path / f"stall-{os.getpid()}.json").read_text())
    assert report["worst_stall_seconds"] >= 1.0
    assert report["stalls_logged"] == 0  # under the threshold: not logged, still reported
    assert "_block_the_loop_for" in report["stack"]


def test_a_forced_exit_writes_the_report_of_the_stall_that_forced_it(tmp_path: Path) -> None:
    exit = _Exit()
    watchdog = Watchdog(
        stall_seconds=100.0,
        grace_seconds=0.3,
        kill_children=exit.kill_children,
        exit=exit,
        report_dir=str(tmp_path),
    )
    watchdog.start()  # never petted: the loop is stuck from the start
    try:
        watchdog.input_ended()
        assert exit.done.wait(SETTLE)
        report = json.loads((tmp_path / f"stall-{os.getpid()}.json").read_text())
    finally:
        watchdog.stop()
    assert report["worst_stall_seconds"] >= 0.3
