"""The guard at a prompt's edges, and where a session's guard comes from.

Between prompts nothing of the agent's may land unseen (a process a cell left running writes
later): at a prompt's start and after its last cell the whole tree is checked by content, off the
event loop, and a change is held (cells.py's `hold`). A confined kernel gets no guard: the sandbox
tiers mount .continual-acp read-only, so there is nothing to detect.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from agent_core import events as ev
from agent_core.control_plane.cells import HoldingSession, hold
from agent_core.control_plane.guard import CONTROL_DIR, ControlPlaneGuard

log = logging.getLogger(__name__)


def new_guard(cwd: str, outside_changes: str) -> ControlPlaneGuard:
    """The guard of the cwd's .continual-acp/ and the enclosing repository's."""
    from agent_core.trust.project_scope import find_repo

    repo = find_repo(cwd)
    roots = [Path(cwd) / CONTROL_DIR] + ([repo / CONTROL_DIR] if repo is not None else [])
    lock = repo / CONTROL_DIR / "harness" / ".lock" if repo is not None else None
    return ControlPlaneGuard(roots, lock_path=lock, outside_changes=outside_changes)


async def check_at_prompt_start(
    guard: ControlPlaneGuard, session: HoldingSession, emit: Callable[[ev.TurnEvent], None]
) -> None:
    """What changed since the last verified state, held unless `control_plane_outside_changes`
    accepts it."""
    try:
        held = await asyncio.to_thread(guard.refresh)
    except Exception:
        log.exception("the control-plane check failed at the start of a prompt")
        return
    if held is not None:
        await hold(session, held, emit)


async def check_at_prompt_end(
    guard: ControlPlaneGuard, session: HoldingSession, emit: Callable[[ev.TurnEvent], None]
) -> None:
    """A change after the prompt's last cell (a process a cell left running) is the agent's too."""
    try:
        held = await asyncio.to_thread(guard.check, "", "", when="after the prompt's last cell", full=True)
    except Exception:
        log.exception("the control-plane check failed at the end of a prompt")
        return
    if held is not None:
        await hold(session, held, emit)
