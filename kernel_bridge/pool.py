"""`KernelPool`: warm kernels ready for new sessions, with a cold-start fallback."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from host_base.private_files import private_dir
from kernel_bridge import reaper, runtime_sweep
from kernel_bridge._tasks import spawn
from kernel_bridge.backend import KernelBackend, as_backend
from kernel_bridge.bootstrap import preload
from kernel_bridge.environment import resolve_interpreter, scrub_environment
from kernel_bridge.errors import KernelBridgeError, KernelStartError
from kernel_bridge.guarantees import KernelGuarantees
from kernel_bridge.hostbridge import HostBridge
from kernel_bridge.interpreter_check import check_ipykernel
from kernel_bridge.kernel_session import KernelSession, SessionOptions
from kernel_bridge.launcher import (
    DEFAULT_STARTUP_TIMEOUT,
    Launcher,
    LaunchSpec,
    RunningKernel,
    start_local_kernel,
)
from kernel_bridge.output import (
    DEFAULT_MAX_FILE_CHARS,
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_MAX_SESSION_OUTPUT_BYTES,
)
from kernel_bridge.snapshot import PER_VARIABLE_CAP, TOTAL_CAP, SnapshotPaths
from kernel_bridge.workspace_launch import workspace_environment

log = logging.getLogger(__name__)

HOST_TRANSPORTS = ("auto", "socket", "stdin")


class KernelPool:
    """Keeps `size` started kernels ready; `acquire` hands one to a session.

    `size=0` switches the pool off (every session cold-starts). A pooled kernel is only ever given
    to one session, so nothing of an earlier session can leak into it; taking one applies the
    session's cwd, env and sys.path with a setup cell. If no kernel is ready, or the ready one is
    unhealthy, `acquire` starts one cold: correctness never depends on the pool.

    The interpreter is validated here, so a wrong path fails at construction with a message naming it.
    `launcher` is the provisioner seam: how a kernel process comes to exist (default: a local
    process via `start_local_kernel`).
    """

    def __init__(
        self,
        size: int = 1,
        *,
        python: str | os.PathLike[str] | None = None,
        runtime_dir: str | os.PathLike[str] | None = None,
        keep_env: Collection[str] = (),
        base_env: Mapping[str, str] | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        interrupt_grace: float = 2.0,
        heartbeat_timeout: float = 10.0,
        snapshot_debounce: float = 2.0,
        snapshot_timeout: float = 30.0,
        prefer_unix_bridge: bool = True,
        refill_delay: float = 1.0,
        per_variable_cap: int = PER_VARIABLE_CAP,
        total_cap: int = TOTAL_CAP,
        launcher: Launcher | KernelBackend = start_local_kernel,
        host_transport: str = "auto",
        max_kernels: int | None = None,
        max_file_chars: int = DEFAULT_MAX_FILE_CHARS,
        max_session_output_bytes: int = DEFAULT_MAX_SESSION_OUTPUT_BYTES,
    ) -> None:
        if size < 0:
            raise ValueError(f"kernel pool size must be >= 0, got {size}")
        if host_transport not in HOST_TRANSPORTS:
            raise ValueError(
                f"host_transport must be one of {', '.join(HOST_TRANSPORTS)}, got {host_transport!r}"
            )
        if max_kernels is not None and max_kernels < 1:
            raise ValueError(f"max_kernels must be >= 1 (or None for no cap), got {max_kernels}")
        # "auto": the socket, plus stdin where the launcher's kernels may be on another machine.
        # What the backend declares (`KernelBackend`); a plain launcher function has the defaults.
        self._backend = as_backend(launcher)
        remote = self._backend.remote
        self.host_stdin = {"socket": "off", "stdin": "only"}.get(
            host_transport, "fallback" if remote else "off"
        )
        # The cap on live kernels of this pool (sessions' kernels + warm ones); None = no cap.
        self.max_kernels = max_kernels
        self.max_file_chars = max_file_chars
        self.max_session_output_bytes = max_session_output_bytes
        self._in_use = 0  # slots held by sessions (and acquires in progress)
        self._slot_waiters = 0
        self.size = size
        self.python = resolve_interpreter(python)
        self._owns_runtime = runtime_dir is None
        self._runtime_arg = Path(runtime_dir) if runtime_dir is not None else None
        self._runtime: Path | None = None
        self.keep_env = frozenset(keep_env)
        # The launch seam's scrub (credentials, the server's CONTINUAL_ACP_* settings): a kernel
        # gets what a gate or an MCP server gets; its bridge variables come with the setup cell.
        self._base_env = workspace_environment(
            dict(base_env if base_env is not None else os.environ), keep=self.keep_env
        )
        self.startup_timeout = startup_timeout
        self.max_output_chars = max_output_chars
        self.interrupt_grace = interrupt_grace
        self.heartbeat_timeout = heartbeat_timeout
        self.snapshot_debounce = snapshot_debounce
        self.snapshot_timeout = snapshot_timeout
        self.prefer_unix_bridge = prefer_unix_bridge
        self.refill_delay = refill_delay
        self.per_variable_cap = per_variable_cap
        self.total_cap = total_cap
        self._interpreter_checked = False  # `check_backend` found ipykernel in `python`
        # A launcher whose kernels serve one workspace each (the sandbox mounts it at start) gets
        # kernels warmed for the workspace of the last session acquired.
        self._binds_cwd = self._backend.binds_cwd
        self._warm_cwd: Path | None = None
        self._ready: list[RunningKernel] = []
        self._warming = 0
        self._warm_tasks: set[asyncio.Task[None]] = set()
        self._changed: asyncio.Condition | None = None
        self._sessions: set[KernelSession] = set()
        self._closed = False
        self.warm_failures = 0
        self.last_warm_error: str | None = None
        self.cold_starts = 0
        self._waiting_acquires = 0

    @property
    def in_use(self) -> int:
        """Kernel slots held by sessions (what `max_kernels` caps, warm kernels aside)."""
        return self._in_use

    @property
    def waiting_acquires(self) -> int:
        """How many `acquire` calls are waiting right now for a warming kernel (observable for tests)."""
        return self._waiting_acquires

    @property
    def runtime_dir(self) -> Path:
        """The pool's private (0700) directory for connection files, sockets, logs and default output."""
        if self._runtime is None:
            if self._runtime_arg is not None:
                self._runtime = private_dir(self._runtime_arg)
            else:
                # Short path under the temp dir: Unix socket paths are limited to ~100 bytes.
                # Made with ourselves named as its owner, then the dirs of servers that were killed
                # are cleared.
                self._runtime = runtime_sweep.create_runtime_dir()
                reaper.remove_on_exit(self._runtime)
                runtime_sweep.sweep_dead(self._runtime.parent, keep=self._runtime)
        return self._runtime

    @property
    def guarantees(self) -> KernelGuarantees:
        """What this pool's backend guarantees (where kernels run, confinement, network)."""
        return self._backend.guarantees

    async def check_backend(self) -> str:
        """Ask the backend whether it can start kernels, without starting one.

        Gateway: URL, token, kernelspec (asked each time). Local and sandbox: the interpreter has
        ipykernel (asked once), and the sandbox's tier probe (once; a `sandbox_tier = "bubblewrap"`
        that cannot work fails here). Returns a short description; raises `KernelStartError`
        naming the backend and the fix.
        """
        if self._backend.local_interpreter and not self._interpreter_checked:
            await check_ipykernel(self.python)
            self._interpreter_checked = True
        return await self._backend.check()

    @property
    def ready_count(self) -> int:
        """How many warm kernels are ready and alive right now."""
        return sum(1 for kernel in self._ready if kernel.exit_code() is None)

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def start(self) -> None:
        """Begin warming kernels in the background; returns at once."""
        if self._closed:
            raise KernelBridgeError("the kernel pool was closed")
        self._backend.begin_sweep()  # end kernels a killed server left (in the background)
        self._refill()

    def _refill(self) -> None:
        if self._closed or self.warm_failures >= 3:
            return
        if self._binds_cwd and self._warm_cwd is None:
            return  # a sandbox kernel is bound to a workspace: warm once one is known
        while len(self._ready) + self._warming < self.size and self._room_for_warm():
            self._warming += 1
            task = spawn(self._warm_one(), "pool-warm")
            self._warm_tasks.add(task)
            task.add_done_callback(self._warm_tasks.discard)

    def _room_for_warm(self) -> bool:
        # Under a cap, a warm kernel never takes the slot a waiting session needs.
        if self.max_kernels is None:
            return True
        if self._slot_waiters:
            return False
        return self._in_use + len(self._ready) + self._warming < self.max_kernels

    def slot_status(self) -> str | None:
        """Why sessions are waiting for a kernel, or None when none is (for `/kernel status`)."""
        if not self._slot_waiters or self.max_kernels is None:
            return None
        return (
            f"waiting for a kernel slot: {self._in_use} of max_kernels={self.max_kernels} kernels are in use "
            f"by other sessions ({self._slot_waiters} session(s) waiting); it starts when one of them closes "
            "(raise `max_kernels` in config.toml or CONTINUAL_ACP_MAX_KERNELS)"
        )

    async def _take_slot(self, on_wait: Callable[[str | None], None] | None) -> None:
        """Hold one of `max_kernels` slots, waiting (and saying why) while all are in use."""
        if self.max_kernels is None:
            self._in_use += 1
            return
        condition = self._condition()
        async with condition:
            if self._in_use >= self.max_kernels:
                self._slot_waiters += 1
                try:
                    # A warm kernel nobody can use yet would only hold memory: stop it.
                    for kernel in self._ready:
                        await kernel.kill()
                    self._ready.clear()
                    if on_wait is not None:
                        on_wait(self.slot_status())
                    while self._in_use >= self.max_kernels:
                        if self._closed:
                            raise KernelBridgeError(
                                "the kernel pool was closed while a session waited for a kernel"
                            )
                        await condition.wait()
                finally:
                    self._slot_waiters -= 1
                    if on_wait is not None:
                        on_wait(None)
            self._in_use += 1

    async def _release_slot(self) -> None:
        condition = self._condition()
        async with condition:
            self._in_use = max(self._in_use - 1, 0)
            condition.notify_all()
        self._refill()

    def _refill_soon(self) -> None:
        # On 2 cores a kernel starting beside the session that just took a warm one roughly
        # triples that session's first cell latency; give the session a head start.
        if self.refill_delay <= 0:
            self._refill()
        else:
            asyncio.get_running_loop().call_later(self.refill_delay, self._refill)

    async def _warm_one(self) -> None:
        kernel: RunningKernel | None = None
        try:
            kernel = await self._start_kernel(self._warm_cwd or self.runtime_dir, {})
            if not await preload(kernel):
                log.warning("preloading a pooled kernel failed; it will be set up at acquire time")
            self.warm_failures = 0
        except asyncio.CancelledError:
            # aclose() cancels warming tasks; a kernel started before the cancel must not outlive it.
            if kernel is not None:
                await kernel.kill()
            raise
        except Exception as exc:
            self.warm_failures += 1
            self.last_warm_error = str(exc)
            log.warning("warming a pooled kernel failed: %s", exc)
        finally:
            self._warming -= 1
        if kernel is not None and self._closed:
            await kernel.kill()
            kernel = None
        async with self._condition():
            if kernel is not None:
                self._ready.append(kernel)
            self._condition().notify_all()

    async def _start_kernel(self, cwd: Path, env: Mapping[str, str]) -> RunningKernel:
        spec = LaunchSpec(
            python=self.python,
            cwd=cwd,
            env={**self._base_env, **env},
            runtime_dir=self.runtime_dir,
            startup_timeout=self.startup_timeout,
        )
        return await self._backend(spec)

    async def _take(self, cwd: Path, env: Mapping[str, str]) -> RunningKernel:
        """A healthy ready kernel, one that is about to be ready, or a cold start."""
        condition = self._condition()
        async with condition:
            while True:
                if self._closed:
                    raise KernelBridgeError("the kernel pool was closed while a session was being acquired")
                if self._binds_cwd and self._warm_cwd != cwd:
                    self._warm_cwd = cwd  # warm for this workspace from now on
                while self._ready:
                    kernel = self._ready.pop(0)
                    if kernel.workspace is not None and kernel.workspace != cwd:
                        await kernel.kill()  # warmed for another workspace
                        continue
                    if kernel.exit_code() is None:
                        self._refill_soon()
                        return kernel
                    log.warning("discarding a pooled kernel that died (exit %s)", kernel.exit_code())
                    await kernel.kill()
                if self._warming == 0:
                    break
                self._waiting_acquires += 1
                try:
                    await condition.wait()
                finally:
                    self._waiting_acquires -= 1
        self._refill()
        self.cold_starts += 1
        return await self._start_kernel(cwd, env)

    async def acquire(
        self,
        cwd: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        setup_code: str | None = None,
        snapshot_path: str | os.PathLike[str] | None = None,
        *,
        snapshot_dir: str | os.PathLike[str] | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        max_output_chars: int | None = None,
        setup_timeout: float = 120.0,
        sys_path: Sequence[str | os.PathLike[str]] = (),
        on_wait: Callable[[str | None], None] | None = None,
    ) -> KernelSession:
        """A kernel session in `cwd` with `env` (secrets scrubbed) applied and `setup_code` run.

        `snapshot_path` (or `snapshot_dir`) is the session directory that holds
        `kernel-state.dill` + `kernel-state.json` (a path ending in `.dill` names the file itself);
        without it no snapshots are taken. The snapshot is NOT restored here: call
        `await session.restore()` when loading a saved session. `output_dir` receives each cell's
        full output (default: a directory in the pool's runtime dir). `setup_code` that runs longer
        than `setup_timeout` is interrupted; its failure is in `session.setup_error`. `sys_path`
        entries go to the front of the kernel's `sys.path` (before the cwd, first entry first).
        Under `max_kernels`, an acquire past the cap waits for a session to shut down;
        `on_wait(reason)` is told why it waits (and `None` once it has a slot).
        """
        if self._closed:
            raise KernelBridgeError("the kernel pool was closed")
        work = Path(cwd).expanduser().resolve()
        if not work.is_dir():
            raise KernelStartError(f"session working directory does not exist: {work}")
        session_env = scrub_environment(dict(env or {}), self.keep_env)
        location = snapshot_path if snapshot_path is not None else snapshot_dir
        snapshot = SnapshotPaths.at(Path(location).expanduser()) if location is not None else None
        if snapshot is not None:
            private_dir(snapshot.directory)
        options = SessionOptions(
            cwd=work,
            env=session_env,
            setup_code=setup_code,
            sys_path=tuple(str(Path(entry).expanduser().resolve()) for entry in sys_path),
            snapshot=snapshot,
            output_dir=Path(output_dir) if output_dir is not None else None,
            max_output_chars=max_output_chars or self.max_output_chars,
            max_file_chars=self.max_file_chars,
            max_session_output_bytes=self.max_session_output_bytes,
            interrupt_grace=self.interrupt_grace,
            heartbeat_timeout=self.heartbeat_timeout,
            snapshot_debounce=self.snapshot_debounce,
            snapshot_timeout=self.snapshot_timeout,
            per_variable_cap=self.per_variable_cap,
            total_cap=self.total_cap,
            setup_timeout=setup_timeout,
            host_stdin=self.host_stdin,
            guarantees=self.guarantees,
        )
        await self._take_slot(on_wait)
        bridge = HostBridge(self.runtime_dir, prefer_unix=self.prefer_unix_bridge)
        try:
            await bridge.start()
            kernel = await self._take(work, session_env)
        except BaseException:
            await bridge.aclose()
            await self._release_slot()
            raise

        async def source() -> RunningKernel:
            return await self._take(work, session_env)

        session = KernelSession(kernel, source, bridge, options)
        session.on_closed = self._release_slot
        try:
            await session._prepare(kernel)
            if self._closed:  # aclose() ran meanwhile and cannot have seen this session
                raise KernelBridgeError("the kernel pool was closed while a session was being acquired")
        except BaseException:
            await session.shutdown(final_snapshot=False)
            raise
        self._sessions = {s for s in self._sessions if not s.closed}
        self._sessions.add(session)
        return session

    async def aclose(self) -> None:
        """Shut every session down (with its final snapshot) and stop the warm kernels."""
        if self._closed:
            return
        self._closed = True
        sessions, self._sessions = list(self._sessions), set()
        for session in sessions:
            try:
                await session.shutdown()
            except Exception:
                log.exception("shutting a kernel session down failed")
        warming = list(self._warm_tasks)
        for task in warming:
            task.cancel()
        # Let them finish (each kills the kernel it was warming), then wake any acquire waiting
        # for one: it sees the pool closed instead of waiting forever.
        await asyncio.gather(*warming, return_exceptions=True)
        async with self._condition():
            self._condition().notify_all()
        ready, self._ready = self._ready, []
        for kernel in ready:
            await kernel.shutdown(timeout=1.0)
        try:  # a remote backend deletes whatever it still has
            await self._backend.aclose()
        except Exception:
            log.exception("closing the kernel launcher failed")
        if self._owns_runtime and self._runtime is not None:
            shutil.rmtree(self._runtime, ignore_errors=True)
            reaper.keep_on_exit(self._runtime)
