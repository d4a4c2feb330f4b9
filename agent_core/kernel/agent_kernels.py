"""The agent's kernels: the kernel pool (built at first need, with the referee's protected paths),
the check that the configured backend can start kernels at all, what it guarantees, and the
factory that starts a session's kernel (held behind `kernel_gate`, the skills' setup code with its
names hidden from snapshots, room made under `max_kernels`, the snapshot restored and said).

`AgentKernels` is a part of `Agent` (agent.py): it names what it uses of the agent below, and the
agent supplies it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core.config.loader import AgentConfig
from agent_core.errors import KernelBackendUnavailable
from agent_core.kernel.backend import pool_options
from agent_core.kernel.hibernation import Hibernator, revive_text
from agent_core.ports import SkillsPort

if TYPE_CHECKING:
    from agent_core.session import Session
    from kernel_bridge import KernelPool, KernelSession
    from kernel_bridge.guarantees import KernelGuarantees

log = logging.getLogger(__name__)


class AgentKernels:
    # What this part uses of the agent (set by `Agent.__init__`).
    config: AgentConfig
    skills: SkillsPort
    hibernator: Hibernator
    kernel_gate: asyncio.Event | None
    _pool: KernelPool | None
    _pool_lock: asyncio.Lock
    _local_interpreter_checked: bool
    _closing: bool
    _room_tasks: set[asyncio.Task[bool]]

    if TYPE_CHECKING:

        def finish_setup(self, session: Session) -> None: ...

    async def _kernel_pool(self) -> KernelPool:
        async with self._pool_lock:
            if self._pool is None:
                from agent_core.control_plane.settings import RefereeSettings
                from kernel_bridge import KernelPool  # deferred: jupyter_client is a slow import

                protected = RefereeSettings.from_extra(self.config.extra).protected_paths
                options = pool_options(
                    self.config.kernel_backend,
                    home=self.config.home,
                    protected=tuple(Path(p).expanduser() for p in protected),
                )
                self._pool = KernelPool(
                    self.config.kernel_pool_size,
                    python=self.config.kernel_python,
                    max_kernels=self.config.max_kernels or None,
                    **options,
                )
                await self._pool.start()
            return self._pool

    async def check_kernel_backend(self) -> None:
        """Fail now, not at the first cell, when the configured backend cannot start kernels.

        No kernel is started: the interpreter is checked for ipykernel (once), the sandbox's tier
        probed (once), a gateway or provisioner asked (each time: it may go down). Raises
        `KernelBackendUnavailable` naming the backend and the fix.
        """
        from kernel_bridge.errors import KernelStartError

        kind = self.config.kernel_backend.kind
        try:
            if kind == "local" and self._pool is None:
                # Before the first session answer the pool is not built (it imports jupyter_client and
                # zmq, ~150 ms on the session/new path): a local kernel needs only an interpreter
                # with ipykernel, which kernel_bridge's light environment module can tell.
                from kernel_bridge.environment import resolve_interpreter
                from kernel_bridge.interpreter_check import check_ipykernel

                if not self._local_interpreter_checked:
                    try:
                        await check_ipykernel(resolve_interpreter(self.config.kernel_python))
                    except KernelStartError as exc:
                        if self.config.kernel_python is None:
                            raise
                        # Name the setting to fix, not only the interpreter it points at.
                        raise KernelStartError(
                            f"setting kernel_python = {self.config.kernel_python!r}: {exc}"
                        ) from exc
                    self._local_interpreter_checked = True
                return
            await (await self._kernel_pool()).check_backend()
        except KernelStartError as exc:
            message = str(exc)
            if not message.startswith("kernel backend"):
                message = f"kernel backend {kind!r}: {message}"
            raise KernelBackendUnavailable(kind, message) from exc

    def kernel_guarantees(self) -> KernelGuarantees | None:
        """What the kernel backend guarantees (for a session's `_meta`); None before the pool exists
        (except for the local backend, whose guarantees are fixed)."""
        if self._pool is None:
            if self.config.kernel_backend.kind == "local":
                from kernel_bridge.guarantees import LOCAL

                return LOCAL
            return None
        return self._pool.guarantees

    def _kernel_factory(
        self, *, restore: bool, revive: bool = False
    ) -> Callable[[Session], Coroutine[Any, Any, KernelSession]]:
        async def start(session: Session) -> KernelSession:
            if self.kernel_gate is not None:
                await self.kernel_gate.wait()
                if self._closing:  # aclose opened the gate: no kernel for a closing agent
                    raise RuntimeError("the agent closed before this session's kernel could start")
            pool = await self._kernel_pool()
            setup = None
            try:
                setup = _hide_setup_names(self.skills.setup_code(session.cwd))
            except Exception:
                log.exception("building the skills setup code failed; the kernel starts without skills")
            if pool.max_kernels is not None and pool.in_use >= pool.max_kernels:
                # Past the cap the coldest kernel hibernates rather than this session waiting.
                await self.hibernator.make_room(pool, session)

            def on_wait(reason: str | None) -> None:
                session.kernel_wait_reason = reason  # `/kernel status` says why it waits
                if reason is not None:  # a slot went elsewhere meanwhile: make room again
                    task = asyncio.get_running_loop().create_task(self.hibernator.make_room(pool, session))
                    self._room_tasks.add(task)
                    task.add_done_callback(self._room_tasks.discard)

            # Each cell's full output stays on disk with the session (0700) for the model to page;
            # the truncated text it receives names the file.
            kernel = await pool.acquire(
                cwd=session.cwd,
                setup_code=setup,
                snapshot_path=session.session_dir,
                output_dir=session.session_dir / "cells",
                # Past `max_kernels` with no kernel that may hibernate, the session waits.
                on_wait=on_wait,
            )
            self.finish_setup(session)  # its `KernelReady` handlers (host ops) first
            session.kernel_ready(kernel)
            if revive:
                # The cell that woke it says what came back (its output reaches the model too).
                session.kernel_handle.revived(revive_text(await kernel.restore()))
            elif restore:
                report = await kernel.restore()
                if report.snapshot_found and (report.restored or report.failed or report.skipped):
                    session.set_kernel_note(_restore_note(report))
            return kernel

        return start


def _restore_note(report: object) -> str:
    restored = list(getattr(report, "restored", []))
    failed = dict(getattr(report, "failed", {}))
    skipped = dict(getattr(report, "skipped", {}))
    parts = [f"Session reloaded; kernel variables restored: {', '.join(restored) or 'none'}."]
    if failed:
        parts.append("Not restored: " + "; ".join(f"{k} ({v})" for k, v in failed.items()) + ".")
    if skipped:
        parts.append("Never saved: " + "; ".join(f"{k} ({v})" for k, v in skipped.items()) + ".")
    return " ".join(parts)


def _hide_setup_names(setup: str | None) -> str | None:
    """Setup code that also marks the names it binds (`editor`, `harness`, `refine`, ...) as IPython's own.

    kernel_bridge snapshots, restores and reports as lost only the user's names and skips names in
    `user_ns_hidden` unless the user rebinds them; the setup re-creates these objects in every new
    kernel, so listing them as "lost" after a restart would be noise.
    """
    if not setup:
        return setup
    return (
        "__cacp_setup_before = set(get_ipython().user_ns)\n"
        f"{setup}\n"
        "get_ipython().user_ns_hidden.update(\n"
        "    {__k: __v for __k, __v in get_ipython().user_ns.items()\n"
        "     if __k not in __cacp_setup_before and not __k.startswith('_')}\n"
        ")\n"
        "del __cacp_setup_before\n"
    )
