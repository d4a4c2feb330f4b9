"""The guard around one cell: check after it, hold what it changed, tell the user and the model.

The turn loop (turn/loop.py) calls `after_cell` whatever way the cell ended; the session (the
`GuardedSession` here) supplies the guard and where a held change goes (a pending review).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from agent_core import events as ev
from agent_core.control_plane.guard import MODEL_NOTE, CheckInThread, ControlPlaneGuard
from agent_core.control_plane.held import HeldChange

__all__ = ["after_cell", "before_cell", "guard_of", "hold", "verified_system_prompt"]

log = logging.getLogger(__name__)


class HoldingSession(Protocol):
    """Where a held change goes: a pending review of the session, and a notice."""

    async def hold_control_plane_change(self, held: HeldChange) -> str | None:
        """Keep `held` as a pending review; its id (None when it could not be kept)."""
        ...

    async def publish(self, event: ev.TurnEvent) -> None: ...


class GuardedSession(HoldingSession, Protocol):
    @property
    def control_plane(self) -> ControlPlaneGuard | None: ...

    def system_prompt(self, parts: Sequence[ev.PromptPart] = ()) -> str: ...


def guard_of(session: GuardedSession) -> ControlPlaneGuard | None:
    return session.control_plane


def _short(path: str) -> str:
    marker = "/.continual-acp/"
    return path[path.find(marker) + 1 :] if marker in path else path


async def hold(session: HoldingSession, held: HeldChange, emit: Callable[[ev.TurnEvent], None] | None) -> str:
    """Hold `held` for review and tell the user; the line for the model's next request."""
    paths = ", ".join(_short(f.path) for f in held.files)
    review_id: str | None = None
    try:
        review_id = await session.hold_control_plane_change(held)
    except Exception:
        log.exception("could not hold a control-plane change for review")
    where = f"pending review {review_id} (/review)" if review_id else "it could not be kept for review"
    restored = "; ".join(held.restore_errors)
    description = f"{held.summary()}. The files were restored; {where}." + (
        f" Not restored: {restored}" if restored else ""
    )
    title = (
        "A cell changed .continual-acp/: held for review"
        if held.when == "while the cell ran"
        else f".continual-acp/ changed {held.when}: held for review"
    )
    notice = ev.Notice("warning", title, description)
    if emit is not None:
        emit(notice)
    else:
        await session.publish(notice)
    return MODEL_NOTE.format(paths=paths)


async def before_cell(session: GuardedSession) -> None:
    """Before a cell: the baseline, if the guard has none yet (its kernel just became ready); it
    reads the whole tree, so off the event loop."""
    guard = guard_of(session)
    if guard is not None and not guard.has_baseline:
        await asyncio.to_thread(guard.ensure_baseline)


MAX_PROMPT_BUILDS = 4
WHILE_PROMPT_BUILT = "while the system prompt was read"


async def verified_system_prompt(
    session: GuardedSession,
    parts: Sequence[ev.PromptPart],
    emit: Callable[[ev.TurnEvent], None],
    system: str,
) -> str:
    """`system` (just built), or built again until nothing under .continual-acp/ moved while it
    was read: a write landing between the last check and the read (a process a cell left running
    can time it) is held and the prompt rebuilt from the restored tree. Where inotify cannot tell,
    one more check after the build (a write undone before it stays unseen there)."""
    guard = guard_of(session)
    for _ in range(MAX_PROMPT_BUILDS):
        if guard is None:
            return system
        settled = guard.settled()
        if settled:
            return system
        held = await _check(guard, "", "", WHILE_PROMPT_BUILT)
        if held is not None:
            await hold(session, held, emit)
        elif settled is None:
            return system  # nothing changed by content, and nothing more to learn here
        # In a thread, as the first build: it reads the repository (AGENTS.md, the skill folders).
        system = await asyncio.to_thread(session.system_prompt, parts)
    return system


async def _check(guard: ControlPlaneGuard, cell_id: str, code: str, when: str) -> HeldChange | None:
    """The check on the event loop when it is quick, else in a thread."""
    try:
        return guard.check(cell_id, code, when=when, wait=False)
    except CheckInThread:  # a store write in progress, or the whole tree to compare
        return await asyncio.to_thread(guard.check, cell_id, code, when=when)


async def after_cell(
    session: GuardedSession,
    cell_id: str,
    code: str,
    emit: Callable[[ev.TurnEvent], None],
    *,
    cancelled: bool = False,
) -> str | None:
    """Check the control plane after a cell; the note for the model, or None when nothing changed.

    The check (and the restore) runs at once, also for a cancelled cell (in a thread when it must
    wait for the store lock or compare the whole tree); holding it then goes on in the background."""
    guard = guard_of(session)
    if guard is None:
        return None
    try:
        held = await _check(guard, cell_id, code, "while the cell ran")
    except Exception:
        log.exception("the control-plane check failed after cell %s", cell_id)
        return None
    if held is None:
        return None
    if cancelled:
        task = asyncio.get_running_loop().create_task(hold(session, held, None))
        _background.add(task)
        task.add_done_callback(_background.discard)
        return None
    return await hold(session, held, emit)


_background: set[asyncio.Task[str]] = set()
