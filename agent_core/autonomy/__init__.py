"""Autonomous mode and goals: gates, the spin guard, the loop, and a session's goal state."""

from __future__ import annotations

from agent_core.autonomy.fingerprint import workspace_fingerprint
from agent_core.autonomy.gates import (
    DetectedGate,
    Gate,
    GateConfigError,
    detect_gates,
    load_project_gates,
    make_gate,
    merge_gates,
)
from agent_core.autonomy.loop import NOT_RERUN, LoopHost, LoopLimits, LoopOutcome, run_autonomous
from agent_core.autonomy.runner import GateResult, run_gate
from agent_core.autonomy.state import (
    AutonomyState,
    AutonomyStateFile,
    Goal,
    billable_tokens,
    goal_context_block,
    new_goal,
)

__all__ = [
    "NOT_RERUN",
    "AutonomyState",
    "AutonomyStateFile",
    "DetectedGate",
    "Gate",
    "GateConfigError",
    "GateResult",
    "Goal",
    "LoopHost",
    "LoopLimits",
    "LoopOutcome",
    "billable_tokens",
    "detect_gates",
    "goal_context_block",
    "load_project_gates",
    "make_gate",
    "merge_gates",
    "new_goal",
    "run_autonomous",
    "run_gate",
    "workspace_fingerprint",
]
