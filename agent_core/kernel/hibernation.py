"""Kernel hibernation: an idle session's kernel is snapshotted and stopped; its next cell revives it.

Two triggers: a kernel idle past `kernel_idle_minutes` (a sweep every few seconds to a minute), and
a new kernel that would pass `max_kernels` (the least recently used kernel makes room, so sessions
past the cap do not wait). Never hibernated: a pinned kernel (`/kernel keep`), one running a cell or
a turn, one with background work the session knows of (running subagents, MCP servers started in the
session, processes the kernel started), and, unless the user was told first, one holding variables
the snapshot cannot restore. The revive itself is the session's kernel factory (a warm pool kernel,
the snapshot restored); this module only decides, stops, and words what the user sees.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_core.session import Session
    from kernel_bridge import KernelPool, KernelSession, RestoreReport

log = logging.getLogger(__name__)

# How long a user told "these variables will not come back" has before the kernel hibernates anyway.
WARN_GRACE = 300.0


class Hibernator:
    """Owned by the agent: `sweep()` hibernates idle kernels, `make_room()` the coldest one."""

    def __init__(
        self,
        sessions: Callable[[], Iterable[Session]],
        *,
        idle_seconds: float,
        revive: Callable[[Session], Any],
        running_children: Callable[[str], int] = lambda _sid: 0,
        clock: Callable[[], float] = time.monotonic,
        warn_grace: float | None = None,
    ) -> None:
        self._sessions = sessions
        self.idle_seconds = idle_seconds  # 0: never on idle
        self._revive = revive  # session -> a kernel factory that restores the snapshot
        self._running_children = running_children
        self.clock = clock
        self.warn_grace = WARN_GRACE if warn_grace is None else warn_grace
        self._room = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the idle sweep (nothing to do when idle hibernation is off)."""
        if self.idle_seconds > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="kernel-hibernation")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        # A kernel hibernates at most one interval after its threshold: a quarter of it, 1 s .. 60 s.
        interval = min(max(self.idle_seconds / 4, 1.0), 60.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except Exception:
                log.exception("the kernel hibernation sweep failed")

    # ------------------------------------------------------------ decisions

    def blocker(self, session: Session) -> str | None:
        """Why this session's kernel must stay live now (None: it may hibernate)."""
        handle = session.kernel_handle
        if handle.pinned:
            return "pinned with `/kernel keep`"
        if session.busy:
            return "a turn is running"
        kernel = handle.running_kernel()
        if handle.current_cell is not None or (kernel is not None and kernel.busy):
            return "it is running a cell"
        children = self._running_children(session.id)
        if children:
            return f"{children} subagent(s) of this session are running"
        connections = session.mcp.connections.values() if session.mcp is not None else ()
        started = [c.name for c in connections if c.state in ("connecting", "ready")]
        if started:
            return "MCP server(s) started in this session are running: " + ", ".join(sorted(started))
        if kernel is not None and session.agent_config.kernel_backend.kind == "local":
            jobs = kernel_child_processes(kernel.kernel_pid)
            if jobs:
                return "a process the kernel started is running: " + ", ".join(jobs[:3])
        return None

    def status_line(self, session: Session) -> str:
        """The `/kernel status` line saying whether and when this live kernel hibernates."""
        handle = session.kernel_handle
        blocker = self.blocker(session)
        if blocker is not None:
            return f"live; not hibernated while {blocker}" if not handle.pinned else f"live; {blocker}"
        if self.idle_seconds <= 0:
            return "live; hibernates only to make room under max_kernels (kernel_idle_minutes = 0)"
        idle = max(self.clock() - handle.last_used, 0.0)
        line = f"live; hibernates after {_minutes(self.idle_seconds)} idle (idle {_minutes(idle)})"
        if handle.hibernate_note:
            line += f"; last attempt: {handle.hibernate_note}"
        return line

    async def sweep(self) -> list[str]:
        """Hibernate every kernel idle past the threshold that may go; returns their session ids."""
        if self.idle_seconds <= 0:
            return []
        now = self.clock()
        done = []
        for session in list(self._sessions()):
            handle = session.kernel_handle
            if not handle.live or now - handle.last_used < self.idle_seconds:
                continue
            idle = _minutes(now - handle.last_used)
            if await self.hibernate(session, f"idle for {idle} (kernel_idle_minutes)") is None:
                done.append(session.id)
        return done

    async def make_room(self, pool: KernelPool, asking: Session) -> bool:
        """Under `max_kernels`: while no slot is free, hibernate the least recently used kernel that
        may go (ones whose unrestorable state was not announced last). True when one was stopped."""
        cap = pool.max_kernels
        if cap is None:
            return False
        stopped = False
        async with self._room:
            while pool.in_use >= cap:
                candidates = sorted(
                    (
                        s
                        for s in self._sessions()
                        if s is not asking and s.kernel_handle.live and self.blocker(s) is None
                    ),
                    key=lambda s: s.kernel_handle.last_used,
                )
                reason = f"least recently used when a kernel was needed past max_kernels={cap}"
                went = False
                # First a kernel whose whole state comes back (or was announced), coldest first;
                # else the coldest one, told first.
                for mode in ("clean", "force"):
                    for session in candidates:
                        if await self.hibernate(session, reason, mode=mode) is None:
                            went = True
                            break
                    if went:
                        break
                if not went:
                    return stopped
                stopped = True
        return stopped

    async def hibernate(self, session: Session, reason: str, *, mode: str = "idle") -> str | None:
        """Snapshot and stop `session`'s kernel; None when it hibernated, else why it did not.

        A kernel holding variables the snapshot cannot restore is not stopped before the user has
        been told which (a notice naming them and `/kernel keep`). `mode`: "idle" tells and stops at
        a later attempt `warn_grace` seconds on; "clean" never tells (it only stops kernels whose
        state comes back or was announced); "force" tells and stops at once (a session waits for
        the slot)."""
        handle = session.kernel_handle
        blocker = self.blocker(session)
        if blocker is not None:
            handle.hibernate_note = f"not hibernated: {blocker}"
            return blocker

        async def check(kernel: KernelSession) -> str | None:
            try:
                manifest = await kernel.snapshot()
            except Exception as exc:
                return f"its snapshot failed ({exc})"
            lost = {str(k): str(v) for k, v in dict(manifest.get("skipped", {})).items()}
            if not lost:
                return None
            names = frozenset(lost)
            warned = handle.warned
            told = warned is not None and names <= warned[0]
            if (
                warned is not None
                and told
                and (mode != "idle" or self.clock() - warned[1] >= self.warn_grace)
            ):
                return None
            if not told and mode != "clean":
                handle.warned = (names, self.clock())
                await _announce(session, lost, reason)
                if mode == "force":
                    return None
            names_text = ", ".join(sorted(lost))
            if mode == "clean":
                return f"it holds variables the snapshot cannot restore ({names_text})"
            return f"it holds variables the snapshot cannot restore ({names_text}); the user was told, it hibernates later"

        why = await handle.hibernate(reason, check, self._revive(session))
        handle.hibernate_note = None if why is None else f"not hibernated: {why}"
        if why is None:
            log.info("kernel of session %s hibernated: %s", session.id, reason)
        return why


async def _announce(session: Session, lost: dict[str, str], reason: str) -> None:
    names = "; ".join(f"{name} ({why})" for name, why in sorted(lost.items()))
    try:
        await session.notify_user(
            "warning",
            "This session's kernel is about to hibernate; some variables will not come back",
            f"The kernel is being stopped ({reason}); its next cell revives it from a snapshot, which "
            f"cannot hold: {names}. Use `/kernel keep` to keep this kernel live.",
        )
    except Exception:
        log.exception("telling session %s about its unrestorable variables failed", session.id)


def revive_text(report: RestoreReport) -> str:
    """The cell card's line: `kernel revived: 12 variables restored, 1 not restorable: x (why)`."""
    lost = {**report.skipped, **report.failed}
    text = (
        f"kernel revived: {len(report.restored)} variable{'' if len(report.restored) == 1 else 's'} restored"
    )
    if lost:
        detail = "; ".join(f"{name} ({why})" for name, why in sorted(lost.items()))
        text += f", {len(lost)} not restorable: {detail}"
    return text


def kernel_child_processes(pid: int | None) -> list[str]:
    """Processes the kernel started that still run (`%%bash --bg`, `subprocess.Popen`), as
    `pid (name)`; empty where /proc cannot tell (not Linux, a kernel in another pid namespace)."""
    if pid is None:
        return []
    found: list[str] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                name = Path(f"/proc/{child}/comm").read_text().strip()
                state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":  # a zombie is done; only its exit status is left
                found.append(f"{child} ({name})")
    return found


def _minutes(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"
