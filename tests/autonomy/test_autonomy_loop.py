"""The autonomous loop over a real git repository with real gate processes.

The model side is a scripted list of workspace edits (one per model turn): the loop itself, the
gates, the fingerprints and the limits are the real code. End-to-end runs with the scripted model
over ACP are in tests/acp_server/test_acp_autonomy.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent_core import events as ev
from agent_core.autonomy import NOT_RERUN, AutonomyState, Gate, LoopLimits, run_autonomous

pytestmark = pytest.mark.anyio

TEST_GATE = Gate("python3 -c 'import app, sys; sys.exit(0 if app.VALUE == 42 else 1)'", timeout=30)


@dataclass
class ScriptedHost:
    """A session stand-in: each model turn applies the next scripted edit to the workspace."""

    root: Path
    edits: list[Callable[[Path], None]]
    gate_list: tuple[Gate, ...] = (TEST_GATE,)
    tokens_per_turn: int = 100
    stop_reason: ev.StopReason = "end_turn"
    state: AutonomyState = field(default_factory=AutonomyState)
    turns: list[str] = field(default_factory=list)
    tokens: int = 0
    checkpoints: list[int] = field(default_factory=list)

    @property
    def cwd(self) -> str:
        return str(self.root)

    async def model_turn(self, parts: Sequence[ev.PromptPart]) -> ev.StopReason:
        text = "".join(p.text for p in parts if isinstance(p, ev.TextPart))
        self.turns.append(text)
        self.tokens += self.tokens_per_turn
        if self.edits:
            self.edits.pop(0)(self.root)
        return self.stop_reason

    def billable_tokens(self) -> int:
        return self.tokens

    def gates(self) -> tuple[Gate, ...]:
        return self.gate_list

    def autonomy_state(self) -> AutonomyState:
        return self.state

    def save_autonomy_state(self, state: AutonomyState) -> None:
        self.state = state

    def gate_environment(self, gate: Gate) -> Mapping[str, str]:
        return {"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"}

    async def before_gate(self, gate: Gate) -> None:
        return None

    async def after_gate(self, gate_id: str, gate: Gate) -> str | None:
        return None

    def checkpoint(self, continuation: int) -> None:
        self.checkpoints.append(continuation)


def _set_value(value: int) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        (root / "app.py").write_text(f"VALUE = {value}\n")

    return edit


def _nothing(root: Path) -> None:
    return None


async def _run(host: ScriptedHost, limits: LoopLimits | None = None) -> tuple[list[ev.TurnEvent], object]:
    events: list[ev.TurnEvent] = []
    outcome = await run_autonomous(
        host, [ev.TextPart("make VALUE 42")], events.append, limits or LoopLimits()
    )
    return events, outcome


def _text(events: list[ev.TurnEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ev.MessageChunk))


async def test_loop_continues_until_the_gate_passes_then_ends_the_turn(repo: Path) -> None:
    host = ScriptedHost(repo, [_set_value(2), _set_value(42)])
    events, outcome = await _run(host)
    assert outcome.stop_reason == "end_turn"  # type: ignore[attr-defined]
    assert outcome.gates_passed  # type: ignore[attr-defined]
    assert len(host.turns) == 2
    finished = [e for e in events if isinstance(e, ev.GateFinished)]
    assert [f.status for f in finished] == ["failed", "completed"]
    assert "Continuing 1/20: gate" in _text(events)


async def test_the_continuation_prompt_names_the_failed_gate_and_says_the_verifier_decides(
    repo: Path,
) -> None:
    host = ScriptedHost(
        repo, [_set_value(2), _set_value(42)], gate_list=(Gate("echo WHY-IT-FAILED; exit 1"),)
    )
    host.edits = [_set_value(2), _set_value(3), _set_value(4)]
    await _run(host, LoopLimits(max_continuations=2))
    second_prompt = host.turns[1]
    assert "echo WHY-IT-FAILED; exit 1" in second_prompt
    assert "failed (exit code 1)" in second_prompt
    assert "WHY-IT-FAILED" in second_prompt.split("```text", 1)[1]
    assert "the gates do" in second_prompt


async def test_an_unchanged_workspace_is_not_regated_and_two_spins_end_the_loop(repo: Path) -> None:
    host = ScriptedHost(repo, [_set_value(2), _nothing, _nothing, _nothing])
    events, outcome = await _run(host)
    finished = [e for e in events if isinstance(e, ev.GateFinished)]
    assert [f.not_rerun for f in finished] == [False, True, True]
    assert finished[1].summary == NOT_RERUN
    assert outcome.stop_reason == "end_turn"  # type: ignore[attr-defined]
    assert "did not change across 2 attempts" in _text(events)
    assert NOT_RERUN in host.turns[2]  # the model was told why the gate did not run
    assert len(host.turns) == 3


async def test_a_change_between_spins_resets_the_spin_count(repo: Path) -> None:
    host = ScriptedHost(repo, [_set_value(2), _nothing, _set_value(3), _nothing, _set_value(42)])
    events, outcome = await _run(host)
    assert outcome.gates_passed  # type: ignore[attr-defined]
    assert [e.not_rerun for e in events if isinstance(e, ev.GateFinished)] == [
        False,
        True,
        False,
        True,
        False,
    ]


async def test_the_continuation_limit_stops_with_max_turn_requests_naming_it(repo: Path) -> None:
    host = ScriptedHost(repo, [_set_value(n) for n in range(2, 12)])
    events, outcome = await _run(host, LoopLimits(max_continuations=3))
    assert outcome.stop_reason == "max_turn_requests"  # type: ignore[attr-defined]
    assert "limit max_continuations = 3" in _text(events)
    assert len(host.turns) == 4  # the first turn + 3 continuations


async def test_the_token_limit_stops_the_loop(repo: Path) -> None:
    host = ScriptedHost(repo, [_set_value(n) for n in range(2, 12)], tokens_per_turn=400)
    events, outcome = await _run(host, LoopLimits(max_tokens=1000))
    assert outcome.stop_reason == "max_turn_requests"  # type: ignore[attr-defined]
    assert "limit max_tokens = 1,000" in _text(events)
    assert len(host.turns) == 3  # 1200 tokens after the third turn


async def test_the_wall_time_limit_stops_the_loop(repo: Path) -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 40.0
        return now[0]

    host = ScriptedHost(repo, [_set_value(n) for n in range(2, 12)])
    events: list[ev.TurnEvent] = []
    outcome = await run_autonomous(
        host, [ev.TextPart("go")], events.append, LoopLimits(max_seconds=100), clock=clock
    )
    assert outcome.stop_reason == "max_turn_requests"
    assert "limit max_seconds = 100" in _text(events)


async def test_a_cancelled_model_turn_ends_the_loop_without_running_gates(repo: Path) -> None:
    host = ScriptedHost(repo, [_set_value(42)], stop_reason="cancelled")
    events, outcome = await _run(host)
    assert outcome.stop_reason == "cancelled"  # type: ignore[attr-defined]
    assert not [e for e in events if isinstance(e, ev.GateStarted)]


async def test_checkpoints_fire_every_k_continuations(repo: Path) -> None:
    host = ScriptedHost(repo, [_set_value(n) for n in range(2, 12)])
    await _run(host, LoopLimits(max_continuations=6, checkpoint_every=2))
    assert host.checkpoints == [2, 4, 6]


async def test_the_plan_shows_every_gate_status(repo: Path) -> None:
    host = ScriptedHost(repo, [_set_value(42)], gate_list=(TEST_GATE, Gate("true")))
    events, _ = await _run(host)
    plans = [e for e in events if isinstance(e, ev.PlanChanged)]
    assert [(p.status, p.content.split(":")[0]) for p in plans[-1].entries] == [
        ("completed", f"Gate `{TEST_GATE.command}`"),
        ("completed", "Gate `true`"),
    ]


async def test_the_failure_fingerprint_is_kept_in_the_saved_state(repo: Path) -> None:
    host = ScriptedHost(repo, [_set_value(2), _set_value(42)])
    seen: list[str | None] = []
    original = host.save_autonomy_state

    def save(state: AutonomyState) -> None:
        seen.append(state.failed_fingerprint(TEST_GATE.command))
        original(state)

    host.save_autonomy_state = save  # type: ignore[method-assign]
    await _run(host)
    assert seen[0] is not None and seen[0].startswith("git:")
    assert seen[-1] is None  # a pass clears the gate's failure
