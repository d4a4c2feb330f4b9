"""Verified skills: a `skill` create/update is run in a scratch kernel before the store writes it.

The check takes a fresh kernel from a `KernelPool` (no session state: a pooled kernel is never
shared), applies the session's cwd and sys.path, and runs one cell that

1. imports `reference.import`,
2. finds `reference.callable` and checks it is callable,
3. checks its signature accepts the `arguments` contract (every declared argument is a parameter
   or swallowed by `**kwargs`; every parameter without a default is declared), and
4. runs the entry's `examples` (`{"args": [...], "kwargs": {...}}` plus `"expect": <value>`,
   `"predicate": "<python expression over result>"` or `"raises": "<ExceptionName>"`),

all bounded by a timeout; the kernel is discarded afterwards. The cell's printed lines are the
check's output: the refinement card shows them (a refused edit's error text, or the applied edit's
`check` note).

`SkillCheckService` runs the checker on its own event-loop thread, so the store's synchronous
pre-apply verifier (`harness_store.verify`) can call it from any thread: the coordinator's worker
threads, the CLI, a test. `verify_enabled` reads `verify_skills` from config.toml (`false`, or a
table per scope `{local = true, global = false, project = true}`); a store with checks switched off
gets `disabled_verifier`, whose note says so on every skill it lets through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core.trust.skill_check_cell import SkillCheck, check_code, parse_output
from harness_store import HarnessEntry
from harness_store.verify import PreApplyVerifier, Verdict

if TYPE_CHECKING:
    from agent_core.session import Session
    from kernel_bridge import KernelPool

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
OFF_NOTE = "not verified: verify_skills is off"


class SkillChecker:
    """Checks skills in scratch kernels taken from `pool` (each kernel is used once, then discarded)."""

    def __init__(self, pool: KernelPool, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.pool = pool
        self.timeout = timeout
        self._closing: set[asyncio.Task[None]] = set()

    async def check(
        self,
        entry: HarnessEntry,
        *,
        cwd: str | os.PathLike[str],
        sys_path: Sequence[str] = (),
        protected: Sequence[str] = (),
    ) -> SkillCheck:
        """Run the check cell for `entry` in a fresh kernel with `cwd` and `sys_path`; a skill that
        writes `.continual-acp/` (gates, the project harness) or a `protected` path is refused."""
        from agent_core.autonomy.tamper import TamperWatch, restore
        from agent_core.control_plane.guard import CONTROL_DIR, ControlPlaneGuard

        guard = ControlPlaneGuard([Path(cwd) / CONTROL_DIR])
        guard.ensure_baseline()
        # The protected paths too, by content: a process the skill starts is not seen by the hook.
        watch = (
            await asyncio.to_thread(TamperWatch.start, cwd, patterns=(), gates=(), protected=protected)
            if protected
            else None
        )
        try:
            check = await self._run(entry, cwd=cwd, sys_path=sys_path)
            held = guard.check("skill-check", entry.id, when="during its skill check")
        finally:
            guard.close()
        touched: list[str] = []
        if watch is not None:
            changed = (await asyncio.to_thread(watch.changes)).protected
            failed = restore(watch, changed)
            touched = [
                f"{c.path}: the protected path {c.path}" + ("" if c.path in failed else " (restored)")
                for c in changed
            ]
        return refuse_writes(check, Path(cwd), protected, held.files if held else (), touched)

    async def _run(
        self, entry: HarnessEntry, *, cwd: str | os.PathLike[str], sys_path: Sequence[str] = ()
    ) -> SkillCheck:
        started = time.monotonic()
        try:
            kernel = await self.pool.acquire(cwd=cwd, sys_path=sys_path)
        except Exception as exc:
            return SkillCheck(False, "kernel", f"no scratch kernel: {exc}", time.monotonic() - started)
        try:
            run = kernel.execute(check_code(entry), timeout=self.timeout)
            try:
                # The kernel interrupts the cell at the timeout; the margin covers a kill + report.
                result = await asyncio.wait_for(run.result(), self.timeout + 15.0)
                output, status = result.output, result.status
            except TimeoutError:
                output, status = "", "interrupted"
        finally:
            # Discard the kernel off the critical path: the verdict does not wait for its shutdown.
            task = asyncio.get_running_loop().create_task(kernel.shutdown(final_snapshot=False))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return parse_output(output, status, self.timeout, time.monotonic() - started)

    async def aclose(self) -> None:
        """Wait for discarded kernels to finish shutting down."""
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)


def refuse_writes(
    check: SkillCheck,
    cwd: Path,
    protected: Sequence[str],
    control_plane: Sequence[Any] = (),
    touched: Sequence[str] = (),
) -> SkillCheck:
    """`check`, refused when the skill wrote the control plane (`control_plane`: what the
    before/after comparison found and restored) or a path under `.continual-acp/` or `protected`."""
    from agent_core.control_plane.guard import CONTROL_DIR

    root = cwd.resolve()
    fences = [(root / CONTROL_DIR, ".continual-acp/ (gates, the project harness)")]
    fences += [
        ((root / p).resolve() if not Path(p).is_absolute() else Path(p), f"the protected path {p}")
        for p in protected
    ]
    bad: list[str] = [
        f"{held.path}: .continual-acp/ (gates, the project harness; restored)" for held in control_plane
    ]
    bad += touched
    for path in check.written:
        if path.startswith("(process)"):
            continue
        target = Path(path)
        with contextlib.suppress(OSError):
            target = target.parent.resolve() / target.name
        for fence, what in fences:
            if target == fence or fence in target.parents:
                bad.append(f"{path}: {what}")
                break
    if not bad:
        return check
    listed = "\n".join(f"- {line}" for line in sorted(set(bad)))
    reason = f"the skill writes paths a skill must not change:\n{listed}"
    return SkillCheck(False, "writes", f"{check.output}\n{reason}".strip(), check.duration, check.written)


class SkillCheckService:
    """A `SkillChecker` on its own event-loop thread with its own small `KernelPool`.

    `verifier(cwd, sys_path)` is a synchronous `PreApplyVerifier` for `HarnessStore.apply`; it may
    be called from any thread but this service's own. Start is lazy (first check); `close()` stops
    the kernels and the thread.
    """

    def __init__(
        self,
        *,
        pool_size: int = 1,
        python: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        pool: KernelPool | None = None,
    ) -> None:
        self.pool_size = pool_size
        self.python = python
        self.timeout = timeout
        self._pool = pool
        self._checker: SkillChecker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="skill-check", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
                asyncio.run_coroutine_threadsafe(self._start(), loop).result()
            return self._loop

    async def _start(self) -> None:
        if self._pool is None:
            from kernel_bridge import (
                KernelPool,  # deferred: jupyter_client is a slow import
                workspace_launch,
            )

            # The launch seam's kernel launcher when the backend confines kernels (a sandbox tier):
            # the skill's code then runs as confined as the session's own cells.
            confined = workspace_launch.confinement_source()
            options: dict[str, Any] = {} if confined is None else {"launcher": confined}
            self._pool = KernelPool(self.pool_size, python=self.python, refill_delay=0.0, **options)
        await self._pool.start()
        self._checker = SkillChecker(self._pool, timeout=self.timeout)

    def warm(self) -> None:
        """Start the loop and the pool now (the first check then finds a kernel warming)."""
        self._ensure()

    def ready_count(self) -> int:
        """How many warm kernels wait in the pool (0 before the first check or `warm`)."""
        return self._pool.ready_count if self._pool is not None else 0

    def check(
        self,
        entry: HarnessEntry,
        *,
        cwd: str | os.PathLike[str],
        sys_path: Sequence[str] = (),
        protected: Sequence[str] = (),
    ) -> SkillCheck:
        """Check `entry` (blocks the calling thread, never this service's loop)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("SkillCheckService.check called from its own loop thread")
        loop = self._ensure()
        assert self._checker is not None
        future = asyncio.run_coroutine_threadsafe(
            self._checker.check(entry, cwd=cwd, sys_path=sys_path, protected=protected), loop
        )
        # A cold start (empty pool) may take a while on a loaded machine; the check itself is bounded.
        return future.result(timeout=self.timeout + 180.0)

    def verifier(
        self, cwd: str | os.PathLike[str], sys_path: Sequence[str] = (), protected: Sequence[str] = ()
    ) -> PreApplyVerifier:
        """The store's pre-apply verifier for skills of a session in `cwd`."""

        def verify(entry: HarnessEntry) -> Verdict:
            return self.check(entry, cwd=cwd, sys_path=sys_path, protected=protected).verdict()

        return verify

    def close(self) -> None:
        """Shut the pool's kernels and the loop thread down (idempotent)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return

        async def stop() -> None:
            if self._checker is not None:
                await self._checker.aclose()
            if self._pool is not None:
                await self._pool.aclose()

        try:
            asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=60)
        except Exception:
            log.exception("stopping the skill check pool failed")
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        loop.close()


def disabled_verifier(note: str = OFF_NOTE) -> PreApplyVerifier:
    """A verifier that lets every skill through, saying so on the applied edit."""

    def verify(entry: HarnessEntry) -> Verdict:
        return Verdict(True, note)

    return verify


def refusing_verifier(reason: str) -> PreApplyVerifier:
    """A verifier that refuses every skill with `reason` (a check that cannot run lets nothing in)."""

    def verify(entry: HarnessEntry) -> Verdict:
        return Verdict(False, reason)

    return verify


def verify_enabled(extra: Mapping[str, Any], scope: str) -> bool:
    """`verify_skills` from config.toml: a bool for every store, or a table by scope (default on)."""
    from agent_core.config.table import value as setting

    value = setting(extra, "verify_skills")
    if isinstance(value, Mapping):
        value = value.get(scope, True)
    return bool(value)


_shared: SkillCheckService | None = None
_shared_lock = threading.Lock()


def shared_service(python: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> SkillCheckService:
    """The process's skill check service (one small pool for every session), closed at exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            import atexit

            _shared = SkillCheckService(python=python, timeout=timeout)
            atexit.register(_shared.close)
        return _shared


def verifier_for(
    extra: Mapping[str, Any],
    scope: str,
    cwd: str | os.PathLike[str],
    *,
    python: str | None = None,
    sys_path: Sequence[str] = (),
) -> PreApplyVerifier:
    """The verifier a store of `scope` gets: the shared service's, or the "off" note per config."""
    if not verify_enabled(extra, scope):
        return disabled_verifier()
    from agent_core.config.table import value as setting

    timeout = setting(extra, "skill_check_timeout")
    protected = tuple(setting(extra, "protected_paths"))
    return shared_service(python, float(timeout)).verifier(cwd, sys_path, protected)


def session_verifiers(session: Session) -> Callable[[str], PreApplyVerifier]:
    """scope -> verifier for one session's refinements (its cwd; config from its agent config)."""
    config = session.agent_config

    def for_scope(scope: str) -> PreApplyVerifier:
        return verifier_for(config.extra, scope, session.cwd, python=config.kernel_python)

    return for_scope


def cli_verifier_factory() -> Any:
    """`(scope, cwd) -> verifier` for `continual-acp harness import` (config from config.toml)."""

    def factory(scope: str, cwd: Any) -> PreApplyVerifier:
        from agent_core.config.loader import load_config

        config = load_config()
        return verifier_for(config.extra, scope, cwd, python=config.kernel_python)

    return factory
