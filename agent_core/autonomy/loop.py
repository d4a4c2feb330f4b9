"""Autonomous mode: one prompt keeps going — model turn, then a decision — until evidence says stop.

The default decision is *continue* ("missing terminal evidence"). The model ending its turn, or
calling `goal.complete()`, is only a candidate: it triggers the gates, and the loop ends `end_turn`
when every gate exits 0. Otherwise the next turn starts with a continuation prompt that says which
gate failed and how (bounded output) and that the verifier, not the model, decides completion.

Three things keep the loop honest:
* the spin guard: a gate is not rerun on a workspace identical to the one it last failed on (the
  model is told to change something); two such spins in a row end the loop;
* limits on continuations, tokens and wall time, each ending with `max_turn_requests` and a message
  naming the limit;
* cancellation: the loop is one task; cancelling it stops the model stream, the cell or the gate
  process group wherever it is.

Around each gate run the host checks the referee: `before_gate` resolves the gate again against
what was pinned when the loop started (a shadowing file is said, and the pass then asks), and
`after_gate` holds what the gate's process wrote to `.continual-acp/` (project code the gate
imported) before the next model request is built from that tree.

Nothing here knows ACP: it speaks in turn events (`GateStarted`/`GateOutput`/`GateFinished`,
`MessageChunk`, `PlanChanged`) through `emit`, and the host (the session) supplies model turns.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from agent_core import events as ev
from agent_core.autonomy.fingerprint import workspace_fingerprint
from agent_core.autonomy.gates import Gate
from agent_core.autonomy.runner import GateResult, run_gate
from agent_core.autonomy.state import AutonomyState

__all__ = [
    "NOT_RERUN",
    "LoopHost",
    "LoopLimits",
    "LoopOutcome",
    "continuation_prompt",
    "run_autonomous",
]

NOT_RERUN = (
    "not rerun: workspace unchanged since the previous failed gate — edit source files, tests or a "
    "blocker artifact before attempting to finish again"
)
MAX_SPINS = 2
PROMPT_OUTPUT_CHARS = 3_000  # gate output quoted back to the model, per gate (tail-biased)


@dataclass(frozen=True)
class LoopLimits:
    max_continuations: int = 20
    max_tokens: int | None = None  # billable tokens this prompt may spend (cache reads excluded)
    max_seconds: float | None = None
    checkpoint_every: int = 5  # continuations between harness-review checkpoints


@dataclass(frozen=True)
class LoopOutcome:
    stop_reason: ev.StopReason
    message: str | None = None
    continuations: int = 0
    gates_passed: bool = False


class LoopHost(Protocol):
    """What the loop needs from a session."""

    @property
    def cwd(self) -> str: ...

    async def model_turn(self, parts: Sequence[ev.PromptPart]) -> ev.StopReason:
        """Run one model turn (cells included) on `parts`; its events go through the same `emit`."""
        ...

    def billable_tokens(self) -> int:
        """Billable tokens spent in this session so far (input + output + cache writes)."""
        ...

    def gates(self) -> tuple[Gate, ...]: ...

    def autonomy_state(self) -> AutonomyState: ...

    def save_autonomy_state(self, state: AutonomyState) -> None: ...

    def gate_environment(self, gate: Gate) -> Mapping[str, str]:
        """The environment `gate` runs with."""
        ...

    async def before_gate(self, gate: Gate) -> None:
        """Right before `gate` runs: check it still resolves to what was pinned (and say if not)."""
        ...

    async def after_gate(self, gate_id: str, gate: Gate) -> str | None:
        """Right after `gate` ran, before anything uses the tree: hold what its process changed in
        `.continual-acp/`; the note for the model's next request (None: nothing changed)."""
        ...

    def checkpoint(self, continuation: int) -> None:
        """An autonomous checkpoint: the harness review may start (in the background)."""
        ...


Fingerprint = Callable[[str], Awaitable[str]]


async def _fingerprint_in_thread(cwd: str) -> str:
    return await asyncio.to_thread(workspace_fingerprint, cwd)


@dataclass(frozen=True)
class _GateVerdict:
    gate: Gate
    result: GateResult | None  # None: not rerun (spin guard)
    note: str | None = None  # what the server held from the gate's run, for the model

    @property
    def passed(self) -> bool:
        return self.result is not None and self.result.passed

    def line(self) -> str:
        if self.result is None:
            return f"`{self.gate.command}`: {NOT_RERUN}"
        return f"`{self.gate.command}`: {self.result.summary()}"


async def run_gates(
    host: LoopHost,
    emit: Callable[[ev.TurnEvent], None],
    *,
    fingerprint: Fingerprint = _fingerprint_in_thread,
) -> list[_GateVerdict]:
    """Run every gate once (or skip it by the spin guard); record failures' fingerprints."""
    verdicts: list[_GateVerdict] = []
    for gate in host.gates():
        gate_id = f"gate_{uuid.uuid4().hex[:12]}"
        emit(ev.GateStarted(gate_id, gate.command, gate_source(gate)))
        state = host.autonomy_state()
        current = await fingerprint(host.cwd)
        if state.failed_fingerprint(gate.command) == current:
            emit(ev.GateFinished(gate_id, gate.command, "failed", NOT_RERUN, not_rerun=True))
            verdicts.append(_GateVerdict(gate, None))
            continue

        def relay(text: str, gid: str = gate_id) -> None:
            emit(ev.GateOutput(gid, text))

        await host.before_gate(gate)
        try:
            result = await run_gate(gate, host.cwd, env=host.gate_environment(gate), on_output=relay)
        finally:
            # Also when the run is cancelled: what the gate's process wrote is never left in place.
            note = await asyncio.shield(host.after_gate(gate_id, gate))
        status: Literal["completed", "failed"] = "completed" if result.passed else "failed"
        emit(
            ev.GateFinished(
                gate_id,
                gate.command,
                status,
                result.summary(),
                exit_code=result.exit_code,
                output=result.output,
            )
        )
        # The fingerprint taken before the run: a gate that itself writes files (caches, reports)
        # must not make an unchanged workspace look changed.
        host.save_autonomy_state(
            host.autonomy_state().with_failure(gate.command, None if result.passed else current)
        )
        verdicts.append(_GateVerdict(gate, result, note))
    return verdicts


def gate_source(gate: Gate) -> str:
    """Where a gate came from, as its card says it."""
    where = {
        "project": "the project's .continual-acp/gates.toml",
        "user": "your config.toml",
        "session": "this session (/autonomous gate add)",
    }[gate.source]
    return f"{where}, pinned when the loop started"


def continuation_prompt(verdicts: Sequence[_GateVerdict], number: int, limit: int) -> str:
    """What the model is told before continuation `number`: which gates failed, and how."""
    lines = [
        f"[autonomous mode — continuation {number}/{limit}] Missing terminal evidence: not every gate passed.",
        "You do not decide completion; the gates do. Fix the cause, then end your turn (or call "
        "goal.complete(summary)) to have the gates run again.",
    ]
    for verdict in verdicts:
        if verdict.note:
            lines.append(f"- while `{verdict.gate.command}` ran: {verdict.note}")
        if verdict.passed:
            lines.append(f"- `{verdict.gate.command}`: passed")
            continue
        lines.append(f"- {verdict.line()}")
        if verdict.result is not None and verdict.result.output.strip():
            tail = verdict.result.output[-PROMPT_OUTPUT_CHARS:]
            cut = len(verdict.result.output) - len(tail)
            note = f"[... {cut} earlier characters not shown ...]\n" if cut else ""
            lines.append(f"```text\n{note}{tail.rstrip()}\n```")
    return "\n".join(lines)


def _announce(verdicts: Sequence[_GateVerdict], number: int, limit: int) -> str:
    failed = [v for v in verdicts if not v.passed]
    what = "; ".join(
        f"gate `{v.gate.command}` "
        + ("not rerun (workspace unchanged)" if v.result is None else v.result.summary())
        for v in failed
    )
    return f"\n\nContinuing {number}/{limit}: {what}.\n\n"


def _plan(verdicts: Sequence[_GateVerdict], goal_line: str | None) -> ev.PlanChanged:
    entries: list[ev.PlanEntry] = []
    if goal_line:
        entries.append(ev.PlanEntry(f"Goal — {goal_line}", "in_progress", "high"))
    for verdict in verdicts:
        status: Literal["completed", "pending"] = "completed" if verdict.passed else "pending"
        entries.append(
            ev.PlanEntry(f"Gate `{verdict.gate.command}`: {verdict.line().split(': ', 1)[1]}", status)
        )
    return ev.PlanChanged(tuple(entries))


async def run_autonomous(
    host: LoopHost,
    parts: Sequence[ev.PromptPart],
    emit: Callable[[ev.TurnEvent], None],
    limits: LoopLimits,
    *,
    fingerprint: Fingerprint = _fingerprint_in_thread,
    clock: Callable[[], float] = time.monotonic,
) -> LoopOutcome:
    """Turns and gates until the gates pass, a limit is hit, two spins, or a model-side stop."""
    started = clock()
    tokens_at_start = host.billable_tokens()
    spins = 0
    continuation = 0
    current: Sequence[ev.PromptPart] = parts
    while True:
        stop = await host.model_turn(current)
        if stop in ("cancelled", "refusal"):
            return LoopOutcome(stop, continuations=continuation)
        verdicts = await run_gates(host, emit, fingerprint=fingerprint)
        state = host.autonomy_state()
        emit(_plan(verdicts, state.goal.status_line() if state.goal else None))
        if verdicts and all(v.passed for v in verdicts):
            message = f"All gates passed ({', '.join(f'`{v.gate.command}`' for v in verdicts)}): done."
            judge = getattr(host, "judge_pass", None)  # tamper evidence (the session's host has it)
            accepted, evidence = (True, "") if judge is None else await judge()
            if not accepted:
                emit(ev.MessageChunk(f"\n\n{evidence}\n", f"msg_{uuid.uuid4().hex[:16]}"))
                return LoopOutcome("end_turn", evidence, continuation)
            if evidence:
                message = f"{message}\n\n{evidence}"
            emit(ev.MessageChunk(f"\n\n{message}\n", f"msg_{uuid.uuid4().hex[:16]}"))
            return LoopOutcome("end_turn", message, continuation, gates_passed=True)
        failed = [v for v in verdicts if not v.passed]
        spins = spins + 1 if failed and all(v.result is None for v in failed) else 0
        if spins >= MAX_SPINS:
            message = (
                f"Stopped: the workspace did not change across {MAX_SPINS} attempts to finish, so the failing "
                "gates were not rerun. Edit the code or tests (or tell me what blocks it), then prompt again."
            )
            emit(ev.MessageChunk(f"\n\n{message}\n", f"msg_{uuid.uuid4().hex[:16]}"))
            return LoopOutcome("end_turn", message, continuation)
        limit_message = _limit_reached(
            limits, continuation, host.billable_tokens() - tokens_at_start, clock() - started
        )
        if limit_message is None and state.goal is not None and state.goal.budget_exhausted:
            limit_message = (
                f"the goal's token budget is used up ({state.goal.tokens_used:,} of {state.goal.token_budget:,} "
                "tokens; raise it with /goal <objective> --budget N)"
            )
        if limit_message is not None:
            message = f"Stopped before the gates passed: {limit_message}."
            emit(ev.MessageChunk(f"\n\n{message}\n", f"msg_{uuid.uuid4().hex[:16]}"))
            return LoopOutcome("max_turn_requests", message, continuation)
        continuation += 1
        emit(
            ev.MessageChunk(
                _announce(verdicts, continuation, limits.max_continuations), f"msg_{uuid.uuid4().hex[:16]}"
            )
        )
        if limits.checkpoint_every > 0 and continuation % limits.checkpoint_every == 0:
            host.checkpoint(continuation)
        current = [ev.TextPart(continuation_prompt(verdicts, continuation, limits.max_continuations))]


def _limit_reached(limits: LoopLimits, continuations: int, tokens: int, seconds: float) -> str | None:
    if continuations >= limits.max_continuations:
        return f"{continuations} continuations (limit max_continuations = {limits.max_continuations})"
    if limits.max_tokens is not None and tokens >= limits.max_tokens:
        return f"{tokens:,} tokens spent (limit max_tokens = {limits.max_tokens:,}; cache reads not counted)"
    if limits.max_seconds is not None and seconds >= limits.max_seconds:
        return f"{seconds:.0f} s of wall time (limit max_seconds = {limits.max_seconds:.0f})"
    return None
