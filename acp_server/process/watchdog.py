"""The server's watchdog: a thread that sees a stalled event loop and ends a server whose editor left.

Everything the server does runs on one event loop, so one blocking call there (a read the workspace
made hang, a library that blocks) freezes every session and also the reading of stdin: the editor's
EOF is never seen and the process outlives its editor. This thread depends on nothing the loop does:

* **Stalls.** The loop pets the watchdog every `PET_SECONDS` (a `call_later` chain). When it has
  not for `stall_seconds` (`CONTINUAL_ACP_STALL_SECONDS`, default 10), the loop thread's stack is
  logged to stderr, once per stall; the worst stall since start is kept (`worst_stall()`, shown by
  `/kernel status` and `continual-acp doctor`), with the loop's stack as the thread last saw it
  during that stall. With `CONTINUAL_ACP_STALL_REPORT` naming a directory, the record is written
  there at exit (`stall-<pid>.json`, also before a forced exit): `benchmarks/bench_suite_stalls.py`
  runs the test suite with it set and reports the worst stall of every server the suite started.
* **The editor going away.** The thread polls a duplicate of the input descriptor for POLLHUP (the
  write end of a pipe closed, a socket shut down) and watches the parent process id (a parent that
  died re-parents us; the server then sends itself SIGTERM, the orderly shutdown an editor asks for). The transport also reports the EOF it reads (`input_ended`), which covers an
  input that cannot be polled (a regular file).
* **Forced exit.** Once the editor is gone, a loop that has not turned for `grace_seconds`
  (`CONTINUAL_ACP_EXIT_GRACE_SECONDS`, default 5) is given up on: at the latest `grace_seconds`
  after the editor left (or after the loop stuck, when that came later); a loop that still turns
  finishes the orderly shutdown within that shutdown's own bounds plus the grace. Then the thread kills every process group the server started (`kill_children`: the
  kernels' groups; gates and MCP servers watch their parent and end themselves) and `os._exit`s
  with `FORCED_EXIT_CODE`. A forced exit loses only work nobody was answered for: the transcript
  and the harness history are appended and fsynced before any answer that reports them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from host_base.private_files import write_atomic

log = logging.getLogger(__name__)

DEFAULT_STALL_SECONDS = 10.0
DEFAULT_GRACE_SECONDS = 5.0
# How often the loop pets the watchdog, and how often the thread looks.
PET_SECONDS = 0.25
CHECK_SECONDS = 0.25
# The exit status of a forced exit (EX_SOFTWARE): not 0, the orderly path did not finish.
FORCED_EXIT_CODE = 70
# What the orderly path may take after EOF while the loop still turns: the transport's drain and the
# agent's shutdown bound (acp_server/protocol/transport.py, acp_server/sessions/methods.py) -- beyond, the grace.
ORDERLY_SECONDS = 10.0 + 30.0
# A stall this long has its stack taken (for the report), once per stall that beats the last one.
STACK_AFTER_SECONDS = 0.5


@dataclass(frozen=True)
class Stall:
    """The longest time the loop did not turn, and when it began (monotonic clock)."""

    seconds: float
    began: float


def _now() -> float:
    return time.monotonic()


class Watchdog:
    """See `acp_server/process/watchdog.py`. One per serving process (`install`); `current()` finds it."""

    def __init__(
        self,
        *,
        stall_seconds: float = DEFAULT_STALL_SECONDS,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        input_fd: int | None = None,
        kill_children: Callable[[], None] | None = None,
        exit: Callable[[int], None] = os._exit,
        parent_pid: int | None = None,
        report_dir: str | None = None,
    ) -> None:
        self.stall_seconds = stall_seconds
        self.report_dir = report_dir or None
        self._started = _now()
        self._worst_stack: tuple[float, str] | None = None  # (stall seconds when taken, stack)
        self.grace_seconds = grace_seconds
        self._kill_children = kill_children
        self._exit = exit
        self._loop_thread = threading.get_ident()
        self._last_pet = _now()
        self._reported_stall_from: float | None = None
        self._worst = Stall(0.0, self._last_pet)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._gone_at: float | None = None
        self._gone_why = ""
        self.stall_reports = 0
        # Taken at the process's start by the caller: a parent that died before the watchdog existed
        # (while the first `initialize` was answered) is seen all the same.
        self._parent = os.getppid() if parent_pid is None else parent_pid
        # A dup, so the transport closing its descriptor never leaves us polling a reused number.
        self._input_fd = os.dup(input_fd) if input_fd is not None else None
        self._thread = threading.Thread(target=self._run, name="continual-acp-watchdog", daemon=True)

    # ------------------------------------------------------------ the loop's side

    def start(self, loop_thread: int | None = None) -> None:
        """Start watching; `loop_thread` is the ident of the thread running the loop (the caller's)."""
        self._loop_thread = loop_thread if loop_thread is not None else threading.get_ident()
        self.pet()
        self._thread.start()

    def pet(self) -> None:
        """The loop turned: close the current stall (if any) into the record."""
        now = _now()
        with self._lock:
            gap = now - self._last_pet
            if gap > self._worst.seconds:
                self._worst = Stall(gap, self._last_pet)
            self._last_pet = now
            self._reported_stall_from = None

    def heartbeat(self) -> None:
        """Pet now and again in `PET_SECONDS`, from the running loop (`loop.call_soon(heartbeat)`)."""
        import asyncio

        self.pet()
        if not self._stop.is_set():
            asyncio.get_running_loop().call_later(PET_SECONDS, self.heartbeat)

    def input_ended(self, why: str = "stdin closed") -> None:
        """The editor is gone (EOF read by the transport, or seen here): the grace period starts."""
        with self._lock:
            if self._gone_at is None:
                self._gone_at = _now()
                self._gone_why = why

    def stop(self) -> None:
        """The orderly shutdown finished: stop watching (the process is about to exit on its own)."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=1.0)
        self.write_report()
        if self._input_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._input_fd)
            self._input_fd = None

    def worst_stall(self) -> float:
        """The longest the loop has gone without turning since start, the current stall included."""
        with self._lock:
            current = _now() - self._last_pet
            return max(self._worst.seconds, current)

    def status_line(self) -> str:
        """One line for `/kernel status` and `doctor`."""
        worst = self.worst_stall()
        verdict = (
            "" if worst < self.stall_seconds else f" (over the {self.stall_seconds:g} s stall threshold)"
        )
        return f"event loop: worst stall {worst:.2f} s since start{verdict}"

    # ------------------------------------------------------------ the thread

    def _run(self) -> None:
        while not self._stop.wait(CHECK_SECONDS):
            try:
                self._check()
            except Exception:  # the watchdog must outlive its own bugs
                log.exception("watchdog check failed")

    def _check(self) -> None:
        now = _now()
        with self._lock:
            since = self._last_pet
            reported = self._reported_stall_from == since
        stalled = now - since
        if stalled >= STACK_AFTER_SECONDS and (self._worst_stack is None or stalled > self._worst_stack[0]):
            self._worst_stack = (stalled, self._loop_stack())
        if stalled >= self.stall_seconds and not reported:
            with self._lock:
                self._reported_stall_from = since
            self.stall_reports += 1
            self._log_stack(f"the event loop has not turned for {stalled:.1f} s")
        if self._gone_at is None:
            why = self._editor_gone()
            if why is not None:
                log.info("watchdog: %s", why)
                self.input_ended(why)
                if why != "stdin closed":
                    # Stdin may stay open (another process holds the pipe): ask for the orderly
                    # shutdown SIGTERM gets; the grace below still bounds it.
                    with contextlib.suppress(OSError):
                        os.kill(os.getpid(), signal.SIGTERM)
        gone_at = self._gone_at
        if gone_at is None:
            return
        waited = now - gone_at
        # A loop still turning is finishing the orderly shutdown (it has its own bounds); a stuck one
        # gets the grace, counted from the editor leaving or from the loop sticking, the later.
        stuck = stalled >= self.grace_seconds
        if (stuck and waited >= self.grace_seconds) or waited >= ORDERLY_SECONDS + self.grace_seconds:
            self._force_exit(waited)

    def _editor_gone(self) -> str | None:
        if self._parent > 1 and os.getppid() != self._parent:
            return f"the parent process {self._parent} exited"
        fd = self._input_fd
        if fd is None:
            return None
        poller = select.poll()
        # Only the hang-up bits: data waiting is the transport's to read, not a reason to wake.
        poller.register(fd, select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0))
        try:
            events = poller.poll(0)
        except OSError:
            return None
        if any(
            mask & (select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)) for _, mask in events
        ):
            return "stdin closed"
        return None

    def _loop_stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread)
        return "".join(traceback.format_stack(frame)) if frame is not None else "(the loop thread is gone)\n"

    def _log_stack(self, headline: str) -> None:
        stack = self._loop_stack()
        # Straight to stderr as well as the log: logging may be what is stuck (its handler lock).
        text = f"continual-acp WARNING acp_server.process.watchdog: {headline}; its thread is at:\n{stack}"
        with contextlib.suppress(OSError):
            os.write(2, text.encode("utf-8", "replace"))

    def report(self) -> dict[str, object]:
        """The stall record `write_report` writes: the worst stall, when it began (seconds after the
        watchdog started), how many stalls were logged, and the loop's stack during the longest stall
        the thread saw (from `STACK_AFTER_SECONDS` on; None when none lasted that long)."""
        with self._lock:
            record = self._worst
            if not self._stop.is_set():  # a stall still running (a forced exit) counts; after the
                current = _now() - self._last_pet  # loop ended, the pets stopped: no stall then
                if current > record.seconds:
                    record = Stall(current, self._last_pet)
        worst, began = record.seconds, record.began
        stack = self._worst_stack
        return {
            "pid": os.getpid(),
            "worst_stall_seconds": round(worst, 4),
            "began_after_seconds": round(began - self._started, 3),
            "stalls_logged": self.stall_reports,
            "stall_threshold_seconds": self.stall_seconds,
            "stack": stack[1] if stack is not None else None,
        }

    def write_report(self) -> None:
        """Write `report()` to `report_dir/stall-<pid>.json` (nothing without a directory). Never
        raises: a report must not stand in the way of an exit."""
        if self.report_dir is None:
            return
        target = Path(self.report_dir) / f"stall-{os.getpid()}.json"
        try:  # no fsync: read by a benchmark after the exit, not kept across a crash
            write_atomic(
                target, json.dumps(self.report()), temp=target.with_name(target.name + ".tmp"), sync=False
            )
        except (OSError, ValueError) as exc:
            with contextlib.suppress(OSError):
                os.write(
                    2, f"continual-acp WARNING acp_server.process.watchdog: no stall report: {exc}\n".encode()
                )

    def _force_exit(self, waited: float) -> None:
        self.write_report()
        self._log_stack(
            f"{self._gone_why}, and the orderly shutdown has not finished {waited:.1f} s later: "
            "ending the server's process groups and exiting"
        )
        if self._kill_children is not None:
            try:
                self._kill_children()
            except Exception as exc:  # exiting matters more
                with contextlib.suppress(OSError):
                    os.write(
                        2,
                        f"continual-acp ERROR acp_server.process.watchdog: killing children: {exc}\n".encode(),
                    )
        self._exit(FORCED_EXIT_CODE)


_current: Watchdog | None = None


def install(watchdog: Watchdog) -> Watchdog:
    """Make `watchdog` the process's (what `current()` returns)."""
    global _current
    _current = watchdog
    return watchdog


def current() -> Watchdog | None:
    """The serving process's watchdog, None outside `serve` (tests, `demo` before it serves)."""
    return _current
