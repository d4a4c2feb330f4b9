"""`KernelSession`: one session's persistent kernel — cells, interrupts, restarts, snapshots.

Longer than most modules on purpose: the cell queue, kernel replacement and snapshot scheduling
share one lock and one piece of state (which kernel, which run, why it is being replaced), and
splitting them would spread that state machine over several files.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import itertools
import json
import logging
import queue
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from host_base.private_files import private_dir
from kernel_bridge import bootstrap
from kernel_bridge._tasks import spawn
from kernel_bridge.cell import CellRun
from kernel_bridge.checkpoints import CheckpointBounds, checkpoint_code, restore_checkpoint_code, store_dir
from kernel_bridge.errors import KernelBridgeError, SessionClosed
from kernel_bridge.events import (
    CellResult,
    CellStatus,
    Error,
    RestoreReport,
    Stream,
)
from kernel_bridge.guarantees import LOCAL, KernelGuarantees
from kernel_bridge.hostbridge import HostBridge
from kernel_bridge.iopub import Request, route
from kernel_bridge.kernelside import NAMES_OP
from kernel_bridge.launcher import RunningKernel
from kernel_bridge.output import (
    DEFAULT_MAX_FILE_CHARS,
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_MAX_SESSION_OUTPUT_BYTES,
    OutputCollector,
    prune_outputs,
)
from kernel_bridge.snapshot import (
    PER_VARIABLE_CAP,
    TOTAL_CAP,
    SnapshotPaths,
    read_manifest,
    remove_stale_temps,
    restart_report,
    restore_code,
    restore_report,
    snapshot_code,
    untrusted_reason,
)
from kernel_bridge.stdin_host import serve_stdin, stdin_environment

log = logging.getLogger(__name__)

KernelSource = Callable[[], Awaitable[RunningKernel]]

_POLL = 0.2
# After the execute_reply, how long to wait for more iopub traffic before giving up on `idle`.
_IDLE_GRACE = 3.0


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How one session's kernel is set up and supervised (built by `KernelPool.acquire`)."""

    cwd: Path
    env: Mapping[str, str]
    setup_code: str | None = None
    # Extra import paths for the kernel (ahead of the cwd), e.g. where the session's skills live.
    sys_path: tuple[str, ...] = ()
    snapshot: SnapshotPaths | None = None
    output_dir: Path | None = None
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    # Disk bounds of the full-output files: per cell (head + tail kept) and per output dir.
    max_file_chars: int = DEFAULT_MAX_FILE_CHARS
    max_session_output_bytes: int = DEFAULT_MAX_SESSION_OUTPUT_BYTES
    interrupt_grace: float = 2.0
    # A kernel silent on its heartbeat channel this long is treated as dead. Generous because the
    # check runs in this process, which may be starved for seconds on a loaded 2-core machine.
    heartbeat_timeout: float = 10.0
    snapshot_debounce: float = 2.0
    snapshot_timeout: float = 30.0
    per_variable_cap: int = PER_VARIABLE_CAP
    total_cap: int = TOTAL_CAP
    live_buffer_chars: int = 4 * 1024 * 1024
    setup_timeout: float = 120.0
    # Host calls over the kernel's stdin channel: "off" (socket only), "fallback" (when the socket
    # cannot be reached: a kernel on another machine), "only" (forced, for tests and odd networks).
    host_stdin: str = "off"
    # What the backend guarantees (`/kernel status`, doctor, the session's _meta); set by the pool.
    guarantees: KernelGuarantees = LOCAL


class KernelSession:
    """One persistent kernel for one session.

    Cells run one at a time in the order `execute` was called. A kernel that dies or will not stop
    after an interrupt is replaced by a fresh one with the last snapshot restored; the next cell's
    result carries a report of what was restored and what was lost. Create with `KernelPool.acquire`.
    """

    def __init__(
        self, kernel: RunningKernel, source: KernelSource, bridge: HostBridge, options: SessionOptions
    ) -> None:
        self._kernel: RunningKernel | None = kernel
        self._source = source
        self.host_bridge = bridge
        self.options = options
        self._lock = asyncio.Lock()
        self._requests: dict[str, Request] = {}
        self._reader: asyncio.Task[None] | None = None
        self._stdin_reader: asyncio.Task[None] | None = None
        self._pending: list[CellRun] = []
        self._current: CellRun | None = None
        self._interrupting: CellRun | None = None
        self._kill_reason: str | None = None
        # Why a kernel that still had a process was declared dead (its exit code says nothing then).
        self._death_cause: str | None = None
        self._restart_reason: str | None = None
        self._pending_report: str | None = None
        self._known_names: list[str] = []
        self._dirty = False
        self._snapshot_timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._seq = itertools.count(1)
        self.setup_error: str | None = None
        self.last_snapshot: dict[str, Any] | None = None
        self._checkpoints_loaded: RunningKernel | None = None  # the kernel that has the checkpoint module
        self.restarts = 0
        # Called once when the session has shut down (the pool frees its `max_kernels` slot).
        self.on_closed: Callable[[], Awaitable[None]] | None = None
        bridge.register(NAMES_OP, self._names_changed)
        out = options.output_dir
        self._output_dir = private_dir(out) if out is not None else None
        # Without an output_dir the cells' full output goes to a directory of our own in the pool's
        # runtime dir, removed at shutdown: a long-lived server would otherwise keep every cell's
        # output of every closed session in the temp dir until it exits.
        self._owns_output_dir = out is None
        self._output_bytes: int | None = None  # estimated size of the output dir's cell files

    async def _names_changed(self, args: dict[str, Any]) -> None:
        names = args.get("names")
        if isinstance(names, list):
            self._known_names = [str(name) for name in names]

    # -- properties ------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """True while the session is open and its kernel process runs."""
        kernel = self._kernel
        return not self._closed and kernel is not None and kernel.exit_code() is None

    @property
    def closed(self) -> bool:
        """True once `shutdown` has begun; `execute` then raises `SessionClosed`."""
        return self._closed

    @property
    def kernel_pid(self) -> int | None:
        """Process id of the current kernel (None between a kernel's death and its replacement)."""
        return self._kernel.pid if self._kernel is not None else None

    @property
    def guarantees(self) -> KernelGuarantees:
        """The kernel backend and the guarantees in force (`.describe()` for one line of status)."""
        return self.options.guarantees

    @property
    def busy(self) -> bool:
        """True while a cell runs or waits in the queue."""
        return self._current is not None or bool(self._pending)

    @property
    def snapshot_paths(self) -> SnapshotPaths | None:
        """Where this session's snapshot lives, or None when snapshots are off."""
        return self.options.snapshot

    # -- startup ---------------------------------------------------------------------------------

    async def _prepare(self, kernel: RunningKernel) -> None:
        """Start the iopub reader and apply cwd/env/sys.path and the caller's setup code."""
        self._kernel = kernel
        self._reader = spawn(self._read_iopub(kernel), f"iopub-{kernel.pid}")
        env = {**self.options.env, **self.host_bridge.environment()}
        if self.options.host_stdin != "off":
            self._stdin_reader = spawn(serve_stdin(kernel, self.host_bridge, self._stdin_notice), "stdin")
            env.update(stdin_environment(self.options.host_stdin))
        config = {
            "cwd": kernel.kernel_cwd(self.options.cwd),
            "env": env,
            "sys_path": list(self.options.sys_path),
        }
        boot = bootstrap.setup_code(config)
        _, error = await self._internal(boot, timeout=60.0)
        if error is not None:
            raise KernelBridgeError(f"kernel setup failed: {error}")
        self.setup_error = None
        if self.options.setup_code:
            _, error = await self._internal(self.options.setup_code, timeout=self.options.setup_timeout)
            if error is not None:
                self.setup_error = error
                log.warning("kernel setup code failed: %s", error)

    # -- executing cells -------------------------------------------------------------------------

    def execute(self, code: str, *, timeout: float | None = None) -> CellRun:
        """Queue `code`; returns at once. Iterate the run for events or await `run.result()`."""
        if self._closed:
            raise SessionClosed("this kernel session was shut down; acquire a new one")
        run = CellRun(code, self.options.live_buffer_chars)
        self._pending.append(run)
        spawn(self._drive(run, timeout), "cell")
        return run

    def _new_collector(self) -> OutputCollector:
        directory = self._output_dir
        if directory is None:
            kernel = self._kernel
            base = kernel.log_path.parent if kernel is not None else Path(".")
            directory = self._output_dir = private_dir(base / f"output-{id(self):x}")
        name = f"cell-{time.strftime('%Y%m%dT%H%M%S')}-{next(self._seq):04d}.txt"
        self._bound_output_dir(directory)
        return OutputCollector(directory / name, self.options.max_output_chars, self.options.max_file_chars)

    def _bound_output_dir(self, directory: Path) -> None:
        # A running estimate avoids scanning the directory before every cell: it is rescanned
        # (and the oldest files removed) only once the estimate passes the session's cap.
        if self._output_bytes is None:
            self._output_bytes = prune_outputs(directory, self.options.max_session_output_bytes)
        elif self._output_bytes > self.options.max_session_output_bytes:
            self._output_bytes = prune_outputs(directory, self.options.max_session_output_bytes)

    def _count_output(self, collector: OutputCollector) -> None:
        if self._output_bytes is not None:
            with contextlib.suppress(OSError):
                self._output_bytes += collector.path.stat().st_size

    async def _drive(self, run: CellRun, timeout: float | None) -> None:
        collector = self._new_collector()
        run.set_output_path(collector.path)
        started = time.monotonic()
        try:
            async with self._lock:
                if run.done:  # interrupted or shut down while queued
                    return
                self._pending.remove(run)
                self._current = run
                run.started.set()
                started = time.monotonic()
                await self._run_cell(run, collector, timeout, started)
        except BaseException as exc:
            # Never leave a caller waiting on a run that cannot finish.
            if not run.done:
                message = f"{type(exc).__name__}: {exc}"
                collector.add(f"[kernel_bridge failed to run this cell: {message}]\n")
                collector.close()
                error = Error("KernelBridgeError", message, [])
                run.push(error)
                run.finish(
                    CellResult("died", collector.text(), error, collector.path, time.monotonic() - started)
                )
            if not isinstance(exc, Exception):
                raise
            log.exception("cell driver failed")
        finally:
            if run in self._pending:
                self._pending.remove(run)
            if self._current is run:
                self._current = None

    async def _ensure_kernel(self) -> str | None:
        """Called with the lock held: replace a dead kernel; returns the report for the next cell."""
        kernel = self._kernel
        if kernel is not None and kernel.exit_code() is None and self._restart_reason is None:
            return None
        reason = self._restart_reason or "the kernel process had exited"
        return await self._replace_kernel(reason, take_snapshot=False)

    async def _run_cell(
        self, run: CellRun, collector: OutputCollector, timeout: float | None, started: float
    ) -> None:
        report = await self._ensure_kernel()
        if report is None:
            report, self._pending_report = self._pending_report, None
        elif self._pending_report:
            report, self._pending_report = self._pending_report + "\n" + report, None
        kernel = self._kernel
        assert kernel is not None
        for attempt in (1, 2):
            request = Request(run, collector)
            msg_id = kernel.client.execute(
                run.code,
                silent=False,
                store_history=True,
                allow_stdin=self.options.host_stdin != "off",
                stop_on_error=True,
            )
            self._requests[msg_id] = request
            try:
                reply, died = await self._await_reply(kernel, msg_id, request, timeout, run)
            finally:
                self._requests.pop(msg_id, None)
            if not (attempt == 1 and died and self._never_started(kernel, request, reply, run)):
                break
            # The kernel was already dead when the cell was sent (killed a moment before, e.g. in
            # the snapshot window, and not yet reaped): it never took the cell, so the cell has not
            # run. Replace the kernel now and run the cell there, instead of failing it.
            log.info(
                "kernel %s was gone before it took the cell; replacing it and running the cell", kernel.pid
            )
            self._death_cause = None
            fresh = await self._replace_kernel("the kernel process had exited", take_snapshot=False)
            report = fresh if report is None else report + "\n" + fresh
            kernel = self._kernel
            assert kernel is not None
        duration = time.monotonic() - started
        status: CellStatus
        error = request.error
        execution_count: int | None = None
        if died:
            how, self._death_cause = self._death_cause or kernel.describe_exit(), None
            if self._kill_reason is not None:
                status = "interrupted"
                message = (
                    f"{self._kill_reason}; the kernel was killed and will be restarted with the last snapshot"
                )
                ename = "KernelRestarted"
            else:
                status = "died"
                message = (
                    f"the kernel died while running this cell ({how}); a fresh kernel will be "
                    "started for the next cell and the last snapshot restored"
                )
                ename = "KernelDied"
            self._restart_reason = message.split(";")[0]
            self._kill_reason = None
            error = Error(ename, message, [])
            collector.add(f"[{message}]\n")
            run.push(error)
            spawn(self._restart_in_background(), "restart")
        else:
            assert reply is not None
            content = reply.get("content", {})
            execution_count = content.get("execution_count")
            if content.get("status") == "ok":
                status = "ok"
            elif self._interrupting is run or (error is not None and error.ename == "KeyboardInterrupt"):
                status = "interrupted"
            else:
                status = "error"
                if error is None:
                    error = Error(str(content.get("ename", "Error")), str(content.get("evalue", "")), [])
        if self._interrupting is run:
            self._interrupting = None
        collector.close()
        self._count_output(collector)
        run.finish(
            CellResult(status, collector.text(), error, collector.path, duration, report, execution_count)
        )
        if status == "ok":
            self._mark_dirty()

    def _never_started(
        self, kernel: RunningKernel, request: Request, reply: dict[str, Any] | None, run: CellRun
    ) -> bool:
        """True when a dead kernel never took this cell: killed by a signal from outside (the
        snapshot-window kill), no reply, not one iopub message (ipykernel publishes `busy` before
        it runs any code), and nobody killed it on purpose."""
        # A kernel that stopped answering heartbeats (a frozen gateway, a hung machine) may well have
        # taken the cell: it is not "never started", and rerunning it would hang on the same dead link.
        unreachable = (self._death_cause or "").startswith("no heartbeat")
        # Silence alone is no proof: a cell that calls os._exit() can end the kernel before zmq
        # sends its `busy` status, and rerunning that cell would run it twice. A kernel that exits
        # with a code of its own did run code; only a signal death (negative code) is "killed
        # before it took the cell". Remote kernels report no signal, so they are never rerun.
        code = kernel.exit_code()
        signalled = code is not None and code < 0
        return (
            signalled
            and reply is None
            and not request.heard
            and not unreachable
            and self._kill_reason is None
            and self._interrupting is not run
        )

    async def _await_reply(
        self,
        kernel: RunningKernel,
        msg_id: str,
        request: Request,
        timeout: float | None,
        run: CellRun | None,
    ) -> tuple[dict[str, Any] | None, bool]:
        """Wait for the execute_reply and the idle status; (reply, died)."""
        deadline = time.monotonic() + timeout if timeout is not None else None
        reply: dict[str, Any] | None = None
        timed_out = False
        while True:
            if reply is None:
                try:
                    msg = await kernel.client.get_shell_msg(timeout=_POLL)
                except queue.Empty:
                    msg = None
                except asyncio.CancelledError:
                    if _really_cancelled():
                        raise
                    return reply, True  # zmq cancels pending receives when the kernel is killed
                except Exception as exc:
                    log.debug("shell channel failed: %s", exc)
                    return reply, True
                if msg is not None and msg.get("parent_header", {}).get("msg_id") == msg_id:
                    reply = msg
            elif not request.idle.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(request.idle.wait(), _POLL)
                if not request.idle.is_set() and time.monotonic() - request.last_message > _IDLE_GRACE:
                    # The reply is in and the output has stopped, but the idle status never came
                    # (dropped by zmq). Finish rather than hang; say the output may be incomplete.
                    log.warning("no idle status for %s after its reply; finishing the cell", msg_id)
                    if request.collector is not None:
                        request.collector.add("[kernel_bridge: some output of this cell may be missing]\n")
                    return reply, False
            if reply is not None and request.idle.is_set():
                return reply, False
            if kernel.exit_code() is not None or (
                self._kill_reason is not None and run is self._interrupting
            ):
                return reply, True
            if kernel.heartbeat_silence() > self.options.heartbeat_timeout:
                log.warning("kernel %s stopped answering heartbeats; killing it", kernel.pid)
                self._death_cause = f"no heartbeat for {self.options.heartbeat_timeout:g} s, so it was killed"
                await kernel.kill()
                return reply, True
            if deadline is None or time.monotonic() <= deadline:
                continue
            if run is not None:
                if not timed_out:
                    timed_out = True
                    notice = f"[the cell timed out after {timeout:g} s and was interrupted]\n"
                    if request.collector is not None:
                        request.collector.add(notice)
                    run.push(Stream("stderr", notice))
                    spawn(self._interrupt_run(run, f"the cell timed out after {timeout:g} s"), "timeout")
            elif not timed_out:
                # Internal code (setup, snapshot, restore) over its time: interrupt it first...
                timed_out = True
                try:
                    await kernel.interrupt()
                except Exception as exc:  # the kill below follows after the grace period
                    log.warning("interrupting overdue internal code failed: %s", exc)
            elif time.monotonic() > deadline + self.options.interrupt_grace:
                # ...and replace the kernel if it will not stop.
                self._restart_reason = f"internal kernel code did not finish within {timeout:g} s"
                await kernel.kill()
                return reply, True

    async def _internal(self, code: str, timeout: float) -> tuple[str | None, str | None]:
        """Run bookkeeping code silently (lock held by caller or at setup); (last_result, error)."""
        kernel = self._kernel
        assert kernel is not None
        request = Request(None, None)
        msg_id = kernel.client.execute(
            code,
            silent=True,
            store_history=False,
            user_expressions={"result": "_cak_.last_result"},
            allow_stdin=False,
            stop_on_error=False,
        )
        self._requests[msg_id] = request
        try:
            reply, died = await self._await_reply(kernel, msg_id, request, timeout, None)
            if died or reply is None:
                return None, "the kernel died"
        finally:
            self._requests.pop(msg_id, None)
        content = reply.get("content", {})
        if content.get("status") != "ok":
            return None, f"{content.get('ename', 'Error')}: {content.get('evalue', '')}"
        result = content.get("user_expressions", {}).get("result", {})
        if result.get("status") != "ok":
            return None, None
        try:
            return str(ast.literal_eval(result["data"]["text/plain"])), None
        except (ValueError, SyntaxError, KeyError):
            return None, None

    async def _read_iopub(self, kernel: RunningKernel) -> None:
        while True:
            try:
                msg = await kernel.client.get_iopub_msg()
            except asyncio.CancelledError:
                if _really_cancelled():
                    raise
                return  # the socket was closed under us (kernel killed)
            except Exception as exc:  # channel closed under us: the kernel is gone
                log.debug("iopub reader stopped: %s", exc)
                return
            request = self._requests.get(msg.get("parent_header", {}).get("msg_id", ""))
            if request is not None:
                request.last_message = time.monotonic()
                request.heard = True
                route(request, msg)

    # -- interrupt and restart -------------------------------------------------------------------

    async def interrupt(self) -> None:
        """Stop the running cell (and drop queued ones).

        SIGINT first; a cell still running after the grace period gets its kernel killed, and a
        fresh kernel with the last snapshot restored replaces it (the report reaches the next cell).
        Returns once the running cell has finished.
        """
        for run in list(self._pending):
            if not run.started.is_set():
                self._pending.remove(run)
                collector = self._new_collector()
                collector.add("[not run: interrupted before it started]\n")
                collector.close()
                run.finish(CellResult("interrupted", collector.text(), None, collector.path, 0.0))
        current = self._current
        if current is not None and not current.done:
            await self._interrupt_run(current, "interrupted")

    async def _interrupt_run(self, run: CellRun, why: str) -> None:
        kernel = self._kernel
        if kernel is None or run.done:
            return
        self._interrupting = run
        try:
            await kernel.interrupt()
        except Exception as exc:  # the grace period below still ends the cell
            log.warning("sending SIGINT to kernel %s failed: %s", kernel.pid, exc)
        try:
            await asyncio.wait_for(asyncio.shield(run.result()), self.options.interrupt_grace)
            return
        except TimeoutError:
            pass
        if run.done:
            return
        self._kill_reason = f"{why}; the cell did not stop within {self.options.interrupt_grace:g} s"
        await kernel.kill()
        await run.result()

    async def _restart_in_background(self) -> None:
        async with self._lock:
            if self._closed or self._restart_reason is None:
                return
            try:
                report = await self._replace_kernel(self._restart_reason, take_snapshot=False)
            except SessionClosed:
                return  # shut down meanwhile; the half-started kernel was killed
            self._pending_report = (
                report if not self._pending_report else self._pending_report + "\n" + report
            )

    async def _replace_kernel(self, reason: str, *, take_snapshot: bool) -> str:
        """With the lock held: (snapshot,) kill, start fresh, set up, restore; returns the report."""
        old = self._kernel
        snapshot_note = ""
        if take_snapshot and old is not None and old.exit_code() is None and self.options.snapshot:
            try:
                await self._snapshot_locked()
            except KernelBridgeError as exc:
                log.warning("snapshot before the restart failed: %s", exc)
                snapshot_note = f" The snapshot before the restart failed ({exc}); older state was restored."
        if self._reader is not None:
            self._reader.cancel()
            self._reader = None
        if self._stdin_reader is not None:
            self._stdin_reader.cancel()
            self._stdin_reader = None
        if old is not None:
            await old.kill()
        self._kernel = None
        self._restart_reason = None
        self.restarts += 1
        known = list(self._known_names)
        new = await self._source()
        if self._closed:
            # shutdown() ran while the kernel was starting (it gave up waiting for the lock).
            await new.kill()
            raise SessionClosed("the session was shut down while its kernel was being replaced")
        await self._prepare(new)
        restored: RestoreReport | None = None
        if self.options.snapshot is not None:
            restored = await self._restore_locked()
        text = restart_report(reason, restored, known) + snapshot_note
        if self.setup_error:
            text += f" Kernel setup code failed: {self.setup_error}."
        if restored is not None:
            self._known_names = list(restored.restored)
        return text

    async def restart(self, *, restore: bool = True) -> str:
        """Replace the kernel; with `restore`, state is snapshotted first and restored after."""
        if self._closed:
            raise SessionClosed("this kernel session was shut down")
        if self._current is not None:
            await self.interrupt()
        async with self._lock:
            if not restore:
                snapshot, self.options = self.options, replace(self.options, snapshot=None)
                try:
                    return await self._replace_kernel("restart requested", take_snapshot=False)
                finally:
                    self.options = snapshot
            return await self._replace_kernel("restart requested", take_snapshot=True)

    # -- snapshots -------------------------------------------------------------------------------

    def _mark_dirty(self) -> None:
        if self.options.snapshot is None or self._closed:
            return
        self._dirty = True
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
        loop = asyncio.get_running_loop()
        self._snapshot_timer = loop.call_later(
            self.options.snapshot_debounce, lambda: spawn(self._debounced_snapshot(), "snapshot")
        )

    async def _debounced_snapshot(self) -> None:
        self._snapshot_timer = None
        if self._closed or not self._dirty or self.busy:
            return  # a later cell re-arms the timer when it succeeds
        async with self._lock:
            if self._dirty and self.alive:
                try:
                    await self._snapshot_locked()
                except KernelBridgeError as exc:
                    log.warning("background snapshot failed: %s", exc)

    async def snapshot(self) -> dict[str, Any]:
        """Save the user's variables now; returns the manifest (saved names, skipped with reasons)."""
        if self.options.snapshot is None:
            raise KernelBridgeError("no snapshot location was given for this session (snapshot_path=)")
        async with self._lock:
            return await self._snapshot_locked()

    async def _snapshot_locked(self) -> dict[str, Any]:
        paths = self.options.snapshot
        assert paths is not None
        if not self.alive:
            raise KernelBridgeError("cannot snapshot: the kernel is not running")
        kernel = self._kernel
        assert kernel is not None
        session_paths, paths = paths, kernel.kernel_snapshot(paths)  # where the kernel can write
        if kernel.shares_filesystem:  # else the kernel makes the directory on its own filesystem
            private_dir(paths.directory)
            remove_stale_temps(paths)
        self._dirty = False
        code = snapshot_code(paths, self.options.per_variable_cap, self.options.total_cap)
        result, error = await self._internal(code, timeout=self.options.snapshot_timeout)
        if error is not None or result is None:
            self._dirty = True
            raise KernelBridgeError(f"snapshot failed (previous snapshot kept): {error or 'no result'}")
        manifest: dict[str, Any] = json.loads(result)
        kernel.after_snapshot(session_paths)
        self.last_snapshot = manifest
        return manifest

    async def checkpoint(
        self, label: str, bounds: CheckpointBounds, drop: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Record the user's variables as checkpoint `label` (values unchanged since the last one are
        not pickled again); `drop` names checkpoints to delete first. Returns the kernel's summary:
        names, reused, pickled, bytes, kept and dropped labels, storeBytes."""
        if self.options.snapshot is None:
            raise KernelBridgeError("no snapshot location was given for this session (snapshot_path=)")
        async with self._lock:
            report = await self._ensure_kernel()
            if report is not None:
                self._pending_report = report
            directory = self._checkpoint_dir()
            code = checkpoint_code(
                directory,
                label,
                self.options.per_variable_cap,
                self.options.total_cap,
                bounds,
                list(drop),
                load=self._checkpoints_loaded is not self._kernel,
            )
            result, error = await self._internal(code, timeout=self.options.snapshot_timeout)
            if error is None:
                self._checkpoints_loaded = self._kernel
        if error is not None or result is None:
            raise KernelBridgeError(f"checkpoint failed: {error or 'no result'}")
        summary: dict[str, Any] = json.loads(result)
        return summary

    async def restore_checkpoint(self, label: str) -> dict[str, Any]:
        """Make the user's variables those of checkpoint `label`; what was loaded, kept, removed."""
        if self.options.snapshot is None:
            raise KernelBridgeError("no snapshot location was given for this session (snapshot_path=)")
        async with self._lock:
            report = await self._ensure_kernel()
            if report is not None:
                self._pending_report = report
            code = restore_checkpoint_code(
                self._checkpoint_dir(), label, load=self._checkpoints_loaded is not self._kernel
            )
            result, error = await self._internal(code, timeout=self.options.snapshot_timeout)
            if error is None:
                self._checkpoints_loaded = self._kernel
        if error is not None or result is None:
            raise KernelBridgeError(f"restoring checkpoint {label} failed: {error or 'no result'}")
        payload: dict[str, Any] = json.loads(result)
        self._known_names = sorted(
            (set(self._known_names) | set(payload.get("restored", []))) - set(payload.get("removed", []))
        )
        self._mark_dirty()  # the session's snapshot follows (a reload gets the rewound state)
        return payload

    @property
    def checkpoint_dir(self) -> Path | None:
        """The checkpoint store as the host sees it (None when snapshots are off)."""
        paths = self.options.snapshot
        return store_dir(paths.directory) if paths is not None else None

    def _checkpoint_dir(self) -> Path:
        paths = self.options.snapshot
        assert paths is not None
        kernel = self._kernel
        if kernel is None:
            return store_dir(paths.directory)
        directory = store_dir(kernel.kernel_snapshot(paths).directory)
        if kernel.shares_filesystem:
            private_dir(directory)
        return directory

    async def restore(self) -> RestoreReport:
        """Load the session's snapshot into the kernel, each name independently."""
        if self.options.snapshot is None:
            return RestoreReport(snapshot_found=False)
        async with self._lock:
            report = await self._ensure_kernel()
            if report is not None:
                self._pending_report = report
            return await self._restore_locked()

    async def _restore_locked(self) -> RestoreReport:
        paths = self.options.snapshot
        assert paths is not None
        kernel = self._kernel
        if kernel is not None:
            kernel.before_restore(paths)
            paths = kernel.kernel_snapshot(paths)
            if not kernel.shares_filesystem:
                return await self._restore_remote(paths)
        if not paths.state.exists():
            return RestoreReport(snapshot_found=False)
        refused = untrusted_reason(paths.state)
        if refused is not None:
            manifest = read_manifest(paths) or {}
            names = list(manifest.get("saved", {})) or ["(snapshot)"]
            return RestoreReport(failed=dict.fromkeys(names, f"snapshot not loaded: {refused}"))
        result, error = await self._internal(restore_code(paths), timeout=self.options.snapshot_timeout)
        if error is not None or result is None:
            manifest = read_manifest(paths) or {}
            names = list(manifest.get("saved", {})) or ["(snapshot)"]
            return RestoreReport(failed=dict.fromkeys(names, f"snapshot could not be read: {error}"))
        report = restore_report(json.loads(result))
        self._known_names = sorted(set(self._known_names) | set(report.restored))
        return report

    async def _restore_remote(self, paths: SnapshotPaths) -> RestoreReport:
        """Restore from the kernel's own filesystem: it checks the file (kernelside.restore)."""
        result, error = await self._internal(restore_code(paths), timeout=self.options.snapshot_timeout)
        if error is not None or result is None:
            return RestoreReport(failed={"(snapshot)": f"snapshot could not be read: {error}"})
        payload = json.loads(result)
        if payload.get("missing"):
            return RestoreReport(snapshot_found=False)
        report = restore_report(payload)
        self._known_names = sorted(set(self._known_names) | set(report.restored))
        return report

    def _stdin_notice(self, text: str) -> None:
        run = self._current
        if run is not None and not run.done:
            run.push(Stream("stderr", text))

    # -- shutdown --------------------------------------------------------------------------------

    async def shutdown(self, *, final_snapshot: bool = True, timeout: float | None = None) -> None:
        """Final snapshot (bounded by `timeout`, default the snapshot timeout), then stop the kernel."""
        if self._closed:
            return
        try:
            await self._shutdown(final_snapshot, timeout)
        finally:
            # However the shutdown ended, the pool gets its `max_kernels` slot back (once).
            notify, self.on_closed = self.on_closed, None
            if notify is not None:
                await notify()

    async def _shutdown(self, final_snapshot: bool, timeout: float | None) -> None:
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
        bound = timeout if timeout is not None else self.options.snapshot_timeout
        try:
            await asyncio.wait_for(self.interrupt(), self.options.interrupt_grace + 2.0)
        except Exception as exc:  # the kernel is killed below in any case
            log.warning("interrupting the running cell at shutdown failed: %s", exc)
        if final_snapshot and self.options.snapshot is not None and self.alive:
            try:
                await asyncio.wait_for(self.snapshot(), bound)
            except Exception as exc:
                log.warning("final snapshot failed: %s", exc)
        self._closed = True
        for run in list(self._pending):
            self._pending.remove(run)
            collector = self._new_collector()
            collector.close()
            run.finish(CellResult("interrupted", "[not run: session shut down]", None, collector.path, 0.0))
        # A background restart (after a kernel death) may hold the lock while it starts a kernel;
        # stopping the kernel before it finishes would leave the new one running with no owner.
        locked = False
        if self._current is None:  # a cell that would not stop holds the lock: kill under it
            try:
                await asyncio.wait_for(self._lock.acquire(), bound)
                locked = True
            except TimeoutError:
                log.warning("kernel session shutdown: gave up waiting %.0f s for a kernel restart", bound)
        try:
            if self._reader is not None:
                self._reader.cancel()
            if self._stdin_reader is not None:
                self._stdin_reader.cancel()
            kernel, self._kernel = self._kernel, None
            if kernel is not None:
                await kernel.shutdown(timeout=2.0)
        finally:
            if locked:
                self._lock.release()
        await self.host_bridge.aclose()
        if self._owns_output_dir and self._output_dir is not None:
            shutil.rmtree(self._output_dir, ignore_errors=True)


def _really_cancelled() -> bool:
    """True when this task is being cancelled, as opposed to zmq cancelling a receive on close."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
