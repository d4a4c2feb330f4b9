"""An ended child gives its kernel back (final snapshot first) instead of holding it until its parent
closes; the session stays open (`observe`, cards) and a later cell or `session/load` starts a kernel
that restores the snapshot. A child an editor has taken over (loaded in its own thread: its editor
is no longer the parent's) keeps its kernel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from agent_core.subagents.editor import ChildEditor
from agent_core.subagents.session_port import SubagentAgent, SubagentSession

log = logging.getLogger(__name__)


class KernelReleases:
    """The releases under way (the hub waits for them before the sessions close)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def release(self, agent: SubagentAgent, session: SubagentSession, name: str) -> None:
        """Stop the kernel of the ended child `session` in the background (see the module docstring)."""
        if not isinstance(session.editor, ChildEditor):
            return
        release = getattr(agent, "release_kernel", None)
        if release is None:
            return
        task = asyncio.get_running_loop().create_task(
            _released(release, session), name=f"subagent-release-{name}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self, timeout: float | None = None) -> None:
        """Until every release so far is done (with `timeout`: at most that long, once)."""
        if timeout is not None:
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=timeout)
            return
        while self._tasks:
            await asyncio.wait(set(self._tasks))


async def _released(release: Callable[[SubagentSession], Awaitable[bool]], session: SubagentSession) -> None:
    try:
        await release(session)
    except Exception:
        log.exception("releasing the kernel of subagent session %s failed", session.id)
