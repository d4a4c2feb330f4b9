"""A session's handle on its kernel: starting it once, the cell it runs, and what the user is told.

The kernel starts in the background (at session start, or with the first cell); a failed start is
reported on the cell that waited for it and the next cell tries again. `status()` is the text of
`/kernel status`, `interrupt()` and `restart()` answer `/kernel interrupt` and `/kernel restart`.
`hibernate()` snapshots and stops an idle kernel (hibernation.py decides when); the next cell
revives it and its card says what came back (`take_revived`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernel_bridge import KernelSession

log = logging.getLogger(__name__)

KernelFactory = Callable[[], Coroutine[Any, Any, "KernelSession"]]
# Says why a kernel may not hibernate (None: it may); may take the snapshot the stop relies on.
HibernateCheck = Callable[["KernelSession"], Awaitable[str | None]]


@dataclass(frozen=True)
class Hibernation:
    """Why and when a kernel was stopped, and what its snapshot holds (for `/kernel status`)."""

    reason: str
    at: float  # the handle's clock
    saved: int  # variables in the snapshot
    unrestorable: dict[str, str]  # name -> why the snapshot does not hold it


class KernelHandle:
    """The kernel of one session, started by `factory` on first need."""

    def __init__(self, factory: KernelFactory, *, label: str) -> None:
        self._factory = factory
        self._label = label  # the session id, for logs
        self._task: asyncio.Task[KernelSession] | None = None
        self._note: str | None = None
        self._releasing: asyncio.Event | None = None  # set while `release` stops the kernel
        self._released = False  # stopped by `release`; the next cell starts a new one
        self.current_cell: str | None = None  # the cell running now (for status, interrupt, FileEdited)
        self.cells_run = 0  # cells started in this process (for `/kernel status`)
        # Awaited once, with the kernel, right before the next cell runs (the prompt's checkpoint);
        # the turn loop clears it before calling it.
        self.before_cell: Callable[[KernelSession], Awaitable[None]] | None = None
        self.clock: Callable[[], float] = time.monotonic  # the agent's hibernation clock (injectable)
        self.last_used = self.clock()  # the last cell's start or end, or the kernel's start
        self.pinned = False  # `/kernel keep`: never hibernated
        self.hibernation: Hibernation | None = None  # set while hibernated or reviving
        self.warned: tuple[frozenset[str], float] | None = None  # unrestorable names told, and when
        self._revived: str | None = None  # the revive line for the next cell's card (once)
        self.hibernate_note: str | None = None  # why the last attempt did not hibernate (status)

    def start(self) -> asyncio.Task[KernelSession]:
        """Start the kernel unless it is starting or running (call from a running event loop)."""
        task = self._task
        if task is not None and task.done() and (task.cancelled() or task.exception() is not None):
            task = None  # the last start failed (reported on that cell); the next cell tries again
        if task is None:
            self.touch()
            task = self._task = asyncio.create_task(self._factory())
        return task

    def touch(self) -> None:
        """A cell started or ended: the kernel is not idle."""
        self.last_used = self.clock()

    @property
    def live(self) -> bool:
        """A started kernel whose process runs (what hibernation may stop)."""
        kernel = self._running()
        return kernel is not None and kernel.alive and self._releasing is None

    def running_kernel(self) -> KernelSession | None:
        return self._running()

    async def get(self) -> KernelSession:
        """The kernel (waits for a cold start; a dead kernel is replaced by kernel_bridge)."""
        while self._releasing is not None:
            await self._releasing.wait()  # a kernel being released is snapshotted before a new one starts
        self._released = False
        return await asyncio.shield(self.start())

    def _running(self) -> KernelSession | None:
        task = self._task
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return None
        return task.result()

    # ------------------------------------------------------------ the note for the next prompt

    def take_note(self) -> str | None:
        """What the model should hear about the kernel in the next prompt (once), e.g. what a load restored."""
        note, self._note = self._note, None
        return note

    def set_note(self, note: str | None) -> None:
        self._note = note

    # ------------------------------------------------------------ what the user sees

    async def status(self, cwd: str, hibernation_line: str | None = None) -> str:
        """The `/kernel status` text (`hibernation_line`: whether and when this kernel hibernates)."""
        task = self._task
        sleeping = self.hibernation
        if sleeping is not None and (task is None or not task.done()):
            state = "hibernated" if task is None else "reviving (a new kernel is restoring the snapshot)"
            lost = "; ".join(f"{k} ({v})" for k, v in sorted(sleeping.unrestorable.items()))
            lines = [
                state,
                f"- why: {sleeping.reason}",
                f"- snapshot: {sleeping.saved} variable(s)" + (f"; not restorable: {lost}" if lost else ""),
                "- the next cell revives it (snapshot restored first)",
                f"- cwd: {cwd}",
            ]
            return "\n".join(lines)
        if task is None and self._released:
            return "released (stopped to free it; the next cell starts a kernel that restores its snapshot)"
        if task is None:
            return "not started (starts with the first cell)"
        if not task.done():
            return "starting"
        if task.cancelled():
            return "stopped"
        if task.exception() is not None:
            return f"failed to start: {task.exception()}"
        kernel = task.result()
        if not kernel.alive:
            return "dead (the next cell starts a fresh kernel and restores the last snapshot)"
        state = f"busy (running cell {self.current_cell})" if self.current_cell else "idle"
        names = f"- names defined (as of the last snapshot): {snapshot_names(kernel.last_snapshot)}"
        on_disk = None if kernel.last_snapshot else _manifest_on_disk(kernel)
        if on_disk:
            # Reopened: no snapshot taken by this process yet, but the kernel was restored from the
            # one on disk (agent.py restores it on load/resume) - say that, not "none yet".
            names = f"- names restored from the snapshot on disk: {snapshot_names(on_disk)}"
        lines = [
            state,
            f"- cwd: {cwd}",
            f"- cells run since this server opened the session: {self.cells_run}",
            names,
            f"- kernel pid: {kernel.kernel_pid or 'unknown'}",
            f"- {kernel.guarantees.describe()}",
            f"- {control_plane_line(kernel.guarantees)}",
        ]
        if hibernation_line:
            lines.append(f"- {hibernation_line}")
        return "\n".join(lines)

    async def interrupt(self) -> str:
        """Interrupt the running cell now (never queued behind the turn); says what happened."""
        kernel = self._running()
        if kernel is None:
            return "Nothing to interrupt: the kernel is not running."
        if self.current_cell is None:
            return "Nothing to interrupt: no cell is running (the kernel is idle)."
        cell = self.current_cell
        await kernel.interrupt()
        return f"Interrupted the running cell {cell}; the turn goes on with its output."

    async def restart(self) -> str:
        """Restart the kernel (starting it first if needed); kernel_bridge's report of what came back."""
        kernel = await self.get()
        return str(await kernel.restart())

    # ------------------------------------------------------------ hibernation

    async def hibernate(self, reason: str, check: HibernateCheck, revive: KernelFactory) -> str | None:
        """Stop the idle kernel after `check` (which takes the snapshot) allows it; the next `get()`
        runs `revive`. None when it hibernated, else why not. No cell can start meanwhile: `get()`
        waits while a kernel is being stopped."""
        kernel = self._running()
        if kernel is None or not kernel.alive or self._releasing is not None:
            return "the kernel is not live"
        if self.current_cell is not None or kernel.busy:
            return "it is running a cell"
        releasing = self._releasing = asyncio.Event()
        try:
            why = await check(kernel)
            if why is None and (self.current_cell is not None or kernel.busy):
                why = "it is running a cell"  # code outside a turn (a host op) started one meanwhile
            if why is not None:
                return why
            manifest = kernel.last_snapshot or {}
            self.hibernation = Hibernation(
                reason,
                self.clock(),
                len(manifest.get("saved", {})),
                {str(k): str(v) for k, v in dict(manifest.get("skipped", {})).items()},
            )
            try:
                await kernel.shutdown(final_snapshot=False)  # `check` has just taken it
            except Exception:
                log.exception("stopping the kernel of session %s for hibernation failed", self._label)
            self._task = None
            self.current_cell = None
            self.warned = None
            self._factory = revive
        finally:
            self._releasing = None
            releasing.set()
        return None

    def revived(self, text: str) -> None:
        """The revive finished (snapshot restored): `text` goes on the next cell's card, once."""
        self.hibernation = None
        self._revived = text
        self.touch()

    def take_revived(self) -> str | None:
        text, self._revived = self._revived, None
        return text

    # ------------------------------------------------------------ end

    async def release(self, snapshot_timeout: float, restart: KernelFactory | None = None) -> bool:
        """Stop the kernel to free it (final snapshot first) while its session stays open; the next
        `get()` starts a new one, with `restart` when given (a factory that restores the snapshot).
        True when a kernel was stopped."""
        if self._task is None or self._releasing is not None:
            return False
        releasing = self._releasing = asyncio.Event()
        try:
            await self._stop(snapshot_timeout)
            self._task = None
            self.current_cell = None
            self._released = True
            if restart is not None:
                self._factory = restart
        finally:
            self._releasing = None
            releasing.set()
        return True

    async def shutdown(self, snapshot_timeout: float) -> None:
        """Take the final snapshot (bounded) and stop the kernel; a starting kernel is waited for first."""
        while self._releasing is not None:
            await self._releasing.wait()  # never two stops of one kernel at once
        await self._stop(snapshot_timeout)

    async def _stop(self, snapshot_timeout: float) -> None:
        task = self._task
        if task is None:
            return
        if not task.done():
            # Let a starting kernel finish starting so it can be shut down (never orphaned).
            await asyncio.wait({task}, timeout=60)
        kernel = self._running()
        if kernel is None:
            return
        try:
            # kernel_bridge takes the final snapshot (bounded) before it stops the kernel.
            await kernel.shutdown(timeout=snapshot_timeout)
        except Exception:
            log.exception("kernel shutdown of session %s failed", self._label)


def snapshot_names(manifest: dict[str, Any] | None) -> str:
    """The names of the last snapshot manifest (saved and skipped), for `/kernel status`."""
    if not manifest:
        return "unknown (no snapshot taken yet)"
    names = sorted({*manifest.get("saved", {}), *manifest.get("skipped", {})})
    return ", ".join(names) if names else "none"


def _manifest_on_disk(kernel: KernelSession) -> dict[str, Any] | None:
    """The manifest of the session's snapshot on disk (None without one): what a reopen restored."""
    from kernel_bridge.snapshot import read_manifest

    paths = getattr(getattr(kernel, "options", None), "snapshot", None)
    return read_manifest(paths) if paths is not None else None


# What every backend fences (docs/kernels.md, "The referee, per backend"): said once on each status line.
_FENCED_EVERYWHERE = (
    "host calls, server git, gate programs and the server's key and pipes are fenced on every backend"
)


def control_plane_line(guarantees: Any) -> str:
    """How `.continual-acp/` (gates, the project harness) is kept from cells on this backend, and
    what this backend does not cover: docs/kernels.md's per-backend table in one line."""
    if getattr(guarantees, "confined", False):
        return (
            f"control plane (.continual-acp/: gates, project harness): read-only to cells "
            f"(confined by {guarantees.tier}; gates and skill checks too); {_FENCED_EVERYWHERE}; "
            "not covered: stdio MCP servers run outside the sandbox"
        )
    return (
        "control plane (.continual-acp/: gates, project harness): writable by cells on this backend; "
        "detected, not prevented: after every cell and gate, and between prompts, the server compares "
        "it by content, restores what changed there and holds it for review; "
        f"{_FENCED_EVERYWHERE}; not covered: a cell can signal the server and write the data dir "
        "(use a sandbox tier)"
    )
