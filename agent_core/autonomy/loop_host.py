"""The autonomous loop's host for one prompt: what autonomy/loop.py asks of the session.

Gates run what was pinned when the loop started (each resolved again before it runs: a difference
is a shadowing file, said at once, and the pass is not accepted without asking); the control-plane
check after each gate (the session's guard, or the loop's own when the session has none); the
project's gate file changing mid-loop, said once; tamper evidence judged when the gates pass;
the token count, the saved state and the checkpoint event.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent_core import events as ev
from agent_core.autonomy.gates import Gate, GateConfigError, load_project_gates
from agent_core.autonomy.pinning import GatePin, pin_gate
from agent_core.autonomy.state import AutonomyState, billable_tokens
from agent_core.autonomy.tamper import TESTS_CHANGED, Changed, Evidence, TamperWatch
from agent_core.bus import AutonomousCheckpoint, EventBus
from agent_core.control_plane.cells import HoldingSession
from agent_core.ports import PermissionRequest

if TYPE_CHECKING:
    from agent_core.control_plane.guard import ControlPlaneGuard
    from agent_core.model_events import Usage
    from agent_core.ports import EditorPort

log = logging.getLogger(__name__)

ModelTurn = Callable[[Sequence[ev.PromptPart]], Awaitable[ev.StopReason]]


class LoopSession(HoldingSession, Protocol):
    """What the host uses of the session (controller.py's `AutonomySession` is one)."""

    @property
    def cwd(self) -> str: ...

    @property
    def editor(self) -> EditorPort: ...

    @property
    def usage_totals(self) -> Usage: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def control_plane(self) -> ControlPlaneGuard | None: ...


class LoopOwner(Protocol):
    """What the host uses of the session's autonomy (controller.py's `SessionAutonomy`)."""

    @property
    def session(self) -> LoopSession: ...

    @property
    def state(self) -> AutonomyState: ...

    @property
    def gate_entries(self) -> tuple[ev.PlanEntry, ...]: ...

    def save_state(self, state: AutonomyState) -> None: ...

    def account_usage(self) -> None: ...

    def plan_entries(self) -> tuple[ev.PlanEntry, ...]: ...

    def gate_environment(self, gate: Gate) -> Mapping[str, str]: ...


def usage_tuple(usage: Any) -> tuple[int, int, int, int]:
    return (
        int(getattr(usage, "input_tokens", 0)),
        int(getattr(usage, "output_tokens", 0)),
        int(getattr(usage, "cache_read_tokens", 0)),
        int(getattr(usage, "cache_write_tokens", 0)),
    )


class LoopHost:
    """The loop's view of the session (autonomy/loop.py's host), for one autonomous prompt."""

    def __init__(
        self,
        autonomy: LoopOwner,
        model_turn: ModelTurn,
        pinned: tuple[Gate, ...],
        watch: TamperWatch,
        pins: Mapping[str, GatePin],
    ) -> None:
        self._autonomy = autonomy
        self._model_turn = model_turn
        self._pinned = pinned
        self._watch = watch
        self._pins = dict(pins)
        self._shadowed: dict[str, str] = {}  # path -> what it changed in a gate's resolution
        self._own_guard: ControlPlaneGuard | None = None
        self._project_gates = tuple(g for g in pinned if g.source == "project")
        self._gate_file_reported = False
        self.emit: Callable[[ev.TurnEvent], None] | None = None

    # ------------------------------------------------------------ pins and the control plane

    def start_guard(self) -> None:
        """A control-plane guard for the loop's gates when the session has none (a confined kernel,
        whose cells cannot write `.continual-acp/`, or no kernel yet): gates run outside any sandbox
        the kernel has (blocking: a worker thread)."""
        if self._autonomy.session.control_plane is not None:
            return
        from agent_core.control_plane.guard import CONTROL_DIR, ControlPlaneGuard
        from agent_core.trust.project_scope import find_repo

        cwd = self._autonomy.session.cwd
        repo = find_repo(cwd)
        roots = [Path(cwd) / CONTROL_DIR] + ([repo / CONTROL_DIR] if repo is not None else [])
        lock = repo / CONTROL_DIR / "harness" / ".lock" if repo is not None else None
        try:
            guard = ControlPlaneGuard(roots, lock_path=lock)
            guard.refresh()
        except Exception:
            log.exception("no control-plane guard for the loop's gates")
            return
        self._own_guard = guard

    def close(self) -> None:
        if self._own_guard is not None:
            self._own_guard.close()
            self._own_guard = None

    def _guard(self) -> ControlPlaneGuard | None:
        session_guard = self._autonomy.session.control_plane
        if session_guard is not None:
            if self._own_guard is not None:  # the session's took over (its kernel started)
                self._own_guard.close()
                self._own_guard = None
            return session_guard
        return self._own_guard

    async def before_gate(self, gate: Gate) -> None:
        """Resolve the gate again and compare with its pin; what differs is a shadowing file: said
        now, and the pass is not accepted without asking."""
        pin = self._pins.get(gate.command)
        cwd = self._autonomy.session.cwd
        try:
            now = await asyncio.to_thread(
                pin_gate,
                gate.command,
                cwd,
                self.gate_environment(gate),
                site_dirs=pin.site_dirs if pin else (),
            )
        except Exception:  # unresolvable now: not a pass to trust without asking
            log.exception("could not resolve the gate %r again", gate.command)
            now = None
        if now is None:
            found = [(cwd, f"what `{gate.command}` runs could not be resolved before it ran")]
            found = [f for f in found if f[0] not in self._shadowed]
        elif pin is None:
            found = [(cwd, "what the gate runs could not be resolved when the loop started")]
            self._pins[gate.command] = now
        else:
            found = [(path, why) for path, why in pin.differences(now, cwd) if path not in self._shadowed]
        if not found:
            return
        self._shadowed.update(found)
        if self.emit is not None:
            listed = "; ".join(f"{path} ({why})" for path, why in found)
            self.emit(
                ev.MessageChunk(
                    f"\n\nThe gate `{gate.command}` no longer runs what was pinned when the loop started: "
                    f"{listed}. A pass will not be accepted without asking.\n",
                    f"msg_{os.urandom(8).hex()}",
                )
            )

    async def after_gate(self, gate_id: str, gate: Gate) -> str | None:
        """The control-plane check after a gate's process (project code it imported may have
        written `.continual-acp/`): restored and held before the loop builds its next request."""
        guard = self._guard()
        if guard is None:
            return None
        try:
            held = await asyncio.to_thread(guard.check, gate_id, gate.command, when="while a gate ran")
        except Exception:
            log.exception("the control-plane check failed after the gate %r", gate.command)
            return None
        if held is None:
            return None
        from agent_core.control_plane.cells import hold

        return await hold(self._autonomy.session, held, self.emit)

    @property
    def cwd(self) -> str:
        return self._autonomy.session.cwd

    async def model_turn(self, parts: Sequence[ev.PromptPart]) -> ev.StopReason:
        try:
            return await self._model_turn(parts)
        finally:
            self._autonomy.account_usage()

    def billable_tokens(self) -> int:
        inp, out, _read, write = usage_tuple(self._autonomy.session.usage_totals)
        return billable_tokens(inp, out, write)

    def gates(self) -> tuple[Gate, ...]:
        return self._pinned

    def report_gate_file_change(self, emit: Callable[[ev.TurnEvent], None]) -> None:
        """Said once per loop: the gate file no longer says what the loop started with."""
        if self._gate_file_reported:
            return
        try:
            now = load_project_gates(self._autonomy.session.cwd)
        except GateConfigError as exc:
            now = None
            log.warning("%s", exc)
        if now == self._project_gates:
            return
        self._gate_file_reported = True
        emit(
            ev.MessageChunk(
                "\n\nThe project's gate file (.continual-acp/gates.toml) changed during this loop; the loop "
                "keeps the gates it started with and does not use the change.\n",
                f"msg_{os.urandom(8).hex()}",
            )
        )

    async def judge_pass(self) -> tuple[bool, str]:
        """The gates passed: what they judge by that changed meanwhile (tamper evidence); a change
        to a protected path stops the loop unless the user accepts the pass."""
        evidence = await asyncio.to_thread(self._watch.changes)
        listed = {c.path for c in evidence.changed}
        shadowed = tuple(
            Changed(path, None, None, "protected", note=f"runs in the gate: {why}")
            for path, why in self._shadowed.items()
            if path not in listed
        )
        evidence = Evidence((*evidence.changed, *shadowed))
        if not evidence.changed:
            return True, ""
        if self.emit is not None:
            self.emit(
                ev.PlanChanged(
                    (
                        *self._autonomy.plan_entries(),
                        *self._autonomy.gate_entries,
                        ev.PlanEntry(
                            f"Gate evidence: {TESTS_CHANGED} ({'; '.join(c.line() for c in evidence.changed)})",
                            "pending",
                            "high",
                        ),
                    )
                )
            )
        if evidence.protected:
            names = ", ".join(c.path for c in evidence.protected)
            decision = await self._autonomy.session.editor.request_permission(
                PermissionRequest(
                    cell_id=f"protected-{os.urandom(6).hex()}",
                    title=f"The gates passed, but protected paths changed during the loop ({names}): accept the pass?",
                    code=evidence.stat(),
                    purpose="gates",
                )
            )
            if decision not in ("allow_once", "allow_always"):
                return False, (
                    f"Stopped: the gates passed, but protected paths changed during the loop ({names}); "
                    f"the pass was not accepted.\n\n{evidence.message()}"
                )
        return True, evidence.message()

    def autonomy_state(self) -> AutonomyState:
        return self._autonomy.state

    def save_autonomy_state(self, state: AutonomyState) -> None:
        self._autonomy.save_state(state)

    def gate_environment(self, gate: Gate) -> Mapping[str, str]:
        return self._autonomy.gate_environment(gate)

    def checkpoint(self, continuation: int) -> None:
        # Refinement subscribes its automatic review here (acp_server's composition root).
        self._autonomy.session.bus.emit(
            AutonomousCheckpoint(f"autonomous checkpoint after {continuation} continuations")
        )
