"""Autonomy for one session: its goal, its gates, the autonomous loop, and the kernel's `goal` ops.

`SessionAutonomy.attach(session)` is called from the agent's `on_session` seam (like refinement).
It keeps the goal and the session's gates in `sessions/<id>/autonomy.json`, counts the tokens a goal
spends (input + output + cache writes, never cache reads), gives the model the goal's context block,
runs `autonomous` prompts through the loop, and serves `goal.set/status/complete` to the kernel.

The slash commands (`/goal`, `/autonomous`) call the methods here and print their answers; they
live in acp_server and only format.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent_core import events as ev
from agent_core.autonomy.gates import (
    DetectedGate,
    Gate,
    GateConfigError,
    detect_gates,
    load_project_gates,
    make_gate,
    merge_gates,
    project_gates_file,
)
from agent_core.autonomy.loop import LoopOutcome, run_autonomous
from agent_core.autonomy.loop_host import LoopHost, ModelTurn, usage_tuple
from agent_core.autonomy.pinning import GatePin, gate_modules, pin_gate
from agent_core.autonomy.pinning import gate_environment as pinned_environment
from agent_core.autonomy.settings import AutonomySettings
from agent_core.autonomy.state import (
    AutonomyState,
    AutonomyStateFile,
    Goal,
    billable_tokens,
    goal_context_block,
    new_goal,
)
from agent_core.autonomy.tamper import TamperWatch, runner_patterns
from agent_core.bus import EventBus, KernelReady, TurnFinished
from agent_core.ports import PermissionRequest

if TYPE_CHECKING:
    from agent_core.config.loader import AgentConfig
    from agent_core.control_plane.guard import ControlPlaneGuard
    from agent_core.control_plane.held import HeldChange
    from agent_core.model_events import Usage
    from agent_core.ports import EditorPort
    from kernel_bridge import KernelSession

__all__ = ["SessionAutonomy"]

log = logging.getLogger(__name__)


class AutonomySession(Protocol):
    """The parts of a Session this module uses (`Session` is one; the session declares this
    feature's slot, so this package does not import the session)."""

    autonomy: SessionAutonomy | None  # the slot `attach` fills

    @property
    def id(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    @property
    def editor(self) -> EditorPort: ...

    @property
    def agent_config(self) -> AgentConfig: ...

    @property
    def usage_totals(self) -> Usage: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def session_dir(self) -> Path: ...

    @property
    def mode(self) -> str: ...

    def set_mode(self, mode: str) -> None: ...

    def emit_into_turn(self, event: ev.TurnEvent) -> bool: ...

    # The control-plane guard (what `control_plane.cells.GuardedSession` asks): gates are checked too.
    @property
    def control_plane(self) -> ControlPlaneGuard | None: ...

    async def hold_control_plane_change(self, held: HeldChange) -> str | None: ...

    async def publish(self, event: ev.TurnEvent) -> None: ...

    def record_event(self, event: ev.TurnEvent) -> None: ...


class SessionAutonomy:
    def __init__(self, session: AutonomySession, settings: AutonomySettings) -> None:
        self.session = session
        self.settings = settings
        self._file = AutonomyStateFile(session.session_dir)
        self._state = self._file.load()
        self._seen = usage_tuple(session.usage_totals)
        self.loop_running = False
        self.interrupted_notice: str | None = None
        self._gate_entries: tuple[ev.PlanEntry, ...] = ()  # the last loop's gate statuses, for the plan
        if self._state.goal is not None and self._state.goal.notice == _LOOP_MARK:
            # The server stopped while the loop ran: tell the user once how to go on.
            self.interrupted_notice = (
                "The autonomous loop of this session was interrupted by a server restart; the goal is "
                f"intact ({self._state.goal.objective}). Send a prompt (for example `continue`) to go on."
            )
            self._save(replace(self._state, goal=replace(self._state.goal, notice=None)))

    @classmethod
    def attach(cls, session: AutonomySession) -> SessionAutonomy:
        settings = AutonomySettings.from_extra(session.agent_config.extra)
        autonomy = cls(session, settings)
        session.autonomy = autonomy
        session.bus.subscribe(KernelReady, lambda ready: autonomy.on_kernel(ready.kernel))
        session.bus.subscribe(TurnFinished, autonomy.after_turn)
        return autonomy

    async def after_turn(self, finished: TurnFinished) -> None:
        """Count the turn's tokens against the goal and show the goal (and gates) as the plan."""
        self.account_usage()
        entries = (*self.plan_entries(), *self._gate_entries)
        if entries:
            finished.add(ev.PlanChanged(entries))

    def take_interrupted_notice(self) -> str | None:
        """The "loop interrupted by a restart" message, once."""
        notice, self.interrupted_notice = self.interrupted_notice, None
        return notice

    # ------------------------------------------------------------ state

    @property
    def state(self) -> AutonomyState:
        return self._state

    @property
    def goal(self) -> Goal | None:
        return self._state.goal

    @property
    def gate_entries(self) -> tuple[ev.PlanEntry, ...]:
        """The last loop's gate statuses, for the plan."""
        return self._gate_entries

    def save_state(self, state: AutonomyState) -> None:
        self._save(state)

    def _save(self, state: AutonomyState) -> None:
        self._state = state
        try:
            self._file.save(state)
        except OSError:
            log.exception("could not save the autonomy state of session %s", self.session.id)

    def _goal_changed(self) -> None:
        goal = self._state.goal
        event = ev.GoalChanged(
            objective=goal.objective if goal else None,
            state=goal.state if goal else None,
            status_line=goal.status_line() if goal else "",
        )
        if not self.session.emit_into_turn(event):
            self.session.record_event(event)

    # ------------------------------------------------------------ goal

    def set_goal(self, objective: str, token_budget: int | None = None) -> Goal:
        """Set (or replace) the goal; raises ValueError with a message for the user."""
        goal = new_goal(objective, token_budget)
        previous = self._state.goal
        if previous is not None and previous.state != "complete" and previous.objective != goal.objective:
            goal = replace(goal, notice=f"The objective changed (it was: {previous.objective}).")
        self._save(replace(self._state, goal=goal))
        self._goal_changed()
        return goal

    def _require_goal(self) -> Goal:
        if self._state.goal is None:
            raise ValueError("there is no goal in this session; set one with /goal <objective> [--budget N]")
        return self._state.goal

    def pause(self) -> Goal:
        goal = replace(self._require_goal(), state="paused")
        self._save(replace(self._state, goal=goal))
        self._goal_changed()
        return goal

    def resume(self) -> Goal:
        goal = replace(self._require_goal(), state="active")
        self._save(replace(self._state, goal=goal))
        self._goal_changed()
        return goal

    def clear(self) -> Goal | None:
        previous = self._state.goal
        self._save(replace(self._state, goal=None))
        if previous is not None:
            self._goal_changed()
        return previous

    def complete(self, summary: str | None) -> dict[str, Any]:
        """The model says the goal is met. Outside autonomous mode that marks it complete; inside,
        it is a candidate: the gates run when the turn ends and decide."""
        goal = self._require_goal()
        if self.session.mode == "autonomous":
            self._save(replace(self._state, goal=replace(goal, summary=summary)))
            return {
                "state": goal.state,
                "message": "noted as a candidate: the gates run when this turn ends and decide whether it is done",
            }
        done = replace(goal, state="complete", summary=summary)
        self._save(replace(self._state, goal=done))
        self._goal_changed()
        return {"state": "complete", "message": "goal marked complete"}

    def account_usage(self) -> None:
        """Add the tokens spent since the last call to the active goal (cache reads shown, not counted)."""
        now = usage_tuple(self.session.usage_totals)
        inp, out, read, write = (a - b for a, b in zip(now, self._seen, strict=True))
        self._seen = now
        goal = self._state.goal
        if goal is None or goal.state != "active":
            return
        spent = billable_tokens(inp, out, write)
        if spent == 0 and read == 0:
            return
        updated = replace(
            goal,
            tokens_used=goal.tokens_used + spent,
            cache_read_tokens=goal.cache_read_tokens + max(0, read),
        )
        if not goal.budget_exhausted and updated.budget_exhausted:
            updated = replace(updated, notice="The token budget was just reached.")
        self._save(replace(self._state, goal=updated))

    def context_block(self) -> str | None:
        """The goal block for the system prompt; a one-time notice in it is consumed."""
        goal = self._state.goal
        block = goal_context_block(goal)
        if goal is not None and goal.notice and goal.notice != _LOOP_MARK:
            self._save(replace(self._state, goal=replace(goal, notice=None)))
        return block

    def plan_entries(self) -> tuple[ev.PlanEntry, ...]:
        goal = self._state.goal
        if goal is None:
            return ()
        status = {"active": "in_progress", "paused": "pending", "complete": "completed"}[goal.state]
        return (ev.PlanEntry(f"Goal — {goal.status_line()}", status, "high"),)  # type: ignore[arg-type]

    def goal_status(self) -> str:
        goal = self._state.goal
        if goal is None:
            return "No goal in this session. Set one with `/goal <objective> [--budget TOKENS]`."
        lines = [f"Goal ({goal.state}): {goal.objective}"]
        if goal.token_budget is not None:
            lines.append(
                f"- budget: {goal.tokens_used:,} of {goal.token_budget:,} tokens used ({goal.budget_left:,} left)"
            )
        else:
            lines.append(f"- spent: {goal.tokens_used:,} tokens (no budget)")
        lines.append(
            f"- cache reads: {goal.cache_read_tokens:,} tokens served from the provider's cache, not counted "
            "(counted: input + output + cache writes)"
        )
        if goal.summary:
            lines.append(f"- last completion claim: {goal.summary}")
        return "\n".join(lines)

    # ------------------------------------------------------------ gates

    def gates(self) -> tuple[Gate, ...]:
        """Project gates (re-read each time: the file may change), then the user's, then this session's.

        The project's come from the control-plane guard's verified content when the session has a
        guard (the server never trusts the disk at use time: a write that landed after the guard's
        check is not what a loop pins), else from the disk."""
        try:
            project = load_project_gates(self.session.cwd, self._verified_gate_file())
        except GateConfigError as exc:
            log.warning("%s", exc)
            project = ()
        return merge_gates(project, self.settings.user_gates, self._state.gates)

    def _verified_gate_file(self) -> bytes | None:
        guard = self.session.control_plane
        if guard is None:
            return None
        try:
            content = guard.verified(project_gates_file(self.session.cwd))
        except LookupError:
            return None  # not under the guard's roots, or no baseline yet: the disk is all there is
        return b"" if content is None else content

    def add_gate(self, command: str, timeout: float | None = None) -> Gate:
        gate = make_gate(command) if timeout is None else make_gate(command, timeout)
        if any(g.command == gate.command for g in self._state.gates):
            return gate
        self._save(replace(self._state, gates=(*self._state.gates, gate)))
        return gate

    def remove_gate(self, command: str) -> bool:
        """Remove a session gate; False when no session gate has that command (project and user
        gates are removed where they are defined)."""
        kept = tuple(g for g in self._state.gates if g.command != command.strip())
        if len(kept) == len(self._state.gates):
            return False
        self._save(replace(self._state, gates=kept).with_failure(command.strip(), None))
        return True

    def detected_gates(self) -> list[DetectedGate]:
        return detect_gates(self.session.cwd)

    async def confirm_detected_gates(self, request_id: str) -> tuple[bool, list[DetectedGate]]:
        """Ask the editor to confirm the gates this project declares; adds them when confirmed."""
        detected = [d for d in self.detected_gates() if d.command not in {g.command for g in self.gates()}]
        if not detected:
            return False, []
        code = "\n".join(f"{d.command}    # {d.reason}" for d in detected)
        decision = await self.session.editor.request_permission(
            PermissionRequest(
                cell_id=request_id,
                title="Autonomous mode: use these gate commands to decide when the work is done?",
                code=code,
                purpose="gates",
            )
        )
        if decision not in ("allow_once", "allow_always"):
            return False, detected
        for item in detected:
            self.add_gate(item.command)
        return True, detected

    # ------------------------------------------------------------ the loop

    async def run(
        self, parts: Sequence[ev.PromptPart], emit: Callable[[ev.TurnEvent], None], model_turn: ModelTurn
    ) -> LoopOutcome:
        """One autonomous prompt. With no gate at all it asks for detected ones first; declined or
        none found, the prompt runs as one ordinary turn and says why."""
        if not self.gates():
            confirmed, detected = await self.confirm_detected_gates(f"gates-{os.urandom(6).hex()}")
            if not confirmed:
                why = (
                    "no gate is configured and none was confirmed"
                    if detected
                    else "no gate is configured and the project declares none I could detect"
                )
                stop = await model_turn(parts)
                message = (
                    f"Autonomous mode needs at least one gate ({why}), so this prompt ran as one ordinary "
                    "turn. Add one with `/autonomous gate add <command>` or in .continual-acp/gates.toml."
                )
                emit(ev.MessageChunk(f"\n\n{message}\n", f"msg_{os.urandom(8).hex()}"))
                return LoopOutcome(stop, message)
        pinned = self.gates()  # the loop judges by the gates it started with
        referee = self.settings.referee
        modules = [m for g in pinned for m in gate_modules(g.command)] if referee.protect_runner_files else []
        watch = await asyncio.to_thread(
            TamperWatch.start,
            self.session.cwd,
            patterns=referee.test_patterns,
            gates=pinned,
            protected=referee.protected_paths,
            shadowing=runner_patterns(referee.runner_files, modules),
        )
        pins = await asyncio.to_thread(self._pin, pinned)
        host = LoopHost(self, model_turn, pinned, watch, pins)
        await asyncio.to_thread(host.start_guard)
        self.loop_running = True
        goal = self._state.goal
        if goal is not None:
            self._save(replace(self._state, goal=replace(goal, notice=_LOOP_MARK)))

        def capture(event: ev.TurnEvent) -> None:
            if isinstance(event, ev.GateStarted):
                host.report_gate_file_change(capture)
            if isinstance(event, ev.PlanChanged):
                # The loop's plan lists the gates; the goal line is added by `after_turn`, current.
                self._gate_entries = tuple(e for e in event.entries if e.content.startswith("Gate "))
                event = ev.PlanChanged((*self.plan_entries(), *self._gate_entries))
            emit(event)

        host.emit = capture
        try:
            outcome = await run_autonomous(host, parts, capture, self.settings.limits)
        finally:
            host.close()
            self.loop_running = False
            goal = self._state.goal
            if goal is not None and goal.notice == _LOOP_MARK:
                self._save(replace(self._state, goal=replace(goal, notice=None)))
        if outcome.gates_passed and self._state.goal is not None and self._state.goal.state == "active":
            self._save(replace(self._state, goal=replace(self._state.goal, state="complete")))
            emit(ev.GoalChanged(self._state.goal.objective, "complete", self._state.goal.status_line()))
        return outcome

    def gate_environment(self, gate: Gate) -> dict[str, str]:
        """The environment `gate` runs with: the server's, less credentials, and nothing the
        workspace can extend (`pinning.gate_environment`: no in-workspace PATH folder unless the
        command names a project virtualenv, no code-adding Python variables, `PYTHONSAFEPATH=1`)."""
        from kernel_bridge.environment import scrub_environment

        env = scrub_environment(os.environ)
        for key in [k for k in env if k.startswith("CONTINUAL_ACP_") or k in ("JPY_PARENT_PID",)]:
            env.pop(key)
        return pinned_environment(env, self.session.cwd, gate.command)

    def _pin(self, gates: Sequence[Gate]) -> dict[str, GatePin]:
        """What each gate runs, resolved when the loop starts (blocking: a worker thread)."""
        pins: dict[str, GatePin] = {}
        for gate in gates:
            try:
                pins[gate.command] = pin_gate(gate.command, self.session.cwd, self.gate_environment(gate))
            except Exception:  # never stops the loop; the gate is then unpinned (said before it runs)
                log.exception("could not resolve the gate %r", gate.command)
        return pins

    # ------------------------------------------------------------ kernel

    def on_kernel(self, kernel: KernelSession) -> None:
        bridge = kernel.host_bridge

        async def goal_set(args: dict[str, Any]) -> dict[str, Any]:
            budget = args.get("token_budget")
            goal = self.set_goal(str(args.get("objective") or ""), budget)
            return goal.to_json()

        async def goal_status(args: dict[str, Any]) -> dict[str, Any]:
            goal = self._state.goal
            return {"available": True, "goal": goal.to_json() if goal else None, "mode": self.session.mode}

        async def goal_complete(args: dict[str, Any]) -> dict[str, Any]:
            summary = args.get("summary")
            return self.complete(summary if isinstance(summary, str) else None)

        bridge.register("goal.set", goal_set)
        bridge.register("goal.status", goal_status)
        bridge.register("goal.complete", goal_complete)


# Marks a goal whose loop is running, so a restart can say the loop was interrupted.
_LOOP_MARK = "\0autonomous-loop-running"
