"""Refinement: the continual harness in motion (review gate, planner, coordinator, host ops).

The coordinator wires one session's refinement; the planner's model calls go through the agent's
`ModelClient`.
Nothing here imports acp_server: everything a client is shown leaves through the session's
`HarnessSurface` (`harness_of(session)`) as typed events (`RefinementReported`, `ReviewRequested`,
`ReviewDecided`, `QuiescenceChanged`).
"""

from __future__ import annotations

from agent_core.refinement.attach import SessionRefinement, harness_of
from agent_core.refinement.completion import (
    Completion,
    CompletionClient,
    ModelClientCompletion,
    RefineBudgets,
    refine_model,
)
from agent_core.refinement.coordinator import (
    DEFAULT_AUTO_EVERY,
    DEFAULT_COOLDOWN_SECONDS,
    RefinementCoordinator,
)
from agent_core.refinement.extract import (
    TRUNCATED_MESSAGE,
    InvalidJSONReply,
    NoJSONObjectReply,
    ReplyParseError,
    TruncatedReply,
    extract_json_object,
)
from agent_core.refinement.host_ops import HostOpError, host_handlers, register_host_ops
from agent_core.refinement.outbox import CoordinatorEvent, Outbox
from agent_core.refinement.planner import RefinementPlanner, Windows
from agent_core.refinement.policy import Policy, needs_review
from agent_core.refinement.quiescence import Quiescence
from agent_core.refinement.records import (
    PendingReview,
    QuiescenceChanged,
    RefinementOutcome,
    ReviewChoice,
    ReviewDecided,
    ReviewRequested,
    ReviewVerdict,
    UnknownRefinement,
)
from agent_core.refinement.service import HarnessService
from agent_core.refinement.surface import (
    Found,
    HarnessEvent,
    HarnessStatus,
    HarnessSurface,
    HistoryPage,
    RollbackOutcome,
    SearchHit,
)
from agent_core.refinement.trajectory import (
    TrajectoryItem,
    message_ids,
    render_trajectory,
    trajectory_from_events,
)

__all__ = [
    "DEFAULT_AUTO_EVERY",
    "DEFAULT_COOLDOWN_SECONDS",
    "TRUNCATED_MESSAGE",
    "Completion",
    "CompletionClient",
    "CoordinatorEvent",
    "Found",
    "HarnessEvent",
    "HarnessService",
    "HarnessStatus",
    "HarnessSurface",
    "HistoryPage",
    "HostOpError",
    "InvalidJSONReply",
    "ModelClientCompletion",
    "NoJSONObjectReply",
    "Outbox",
    "PendingReview",
    "Policy",
    "Quiescence",
    "QuiescenceChanged",
    "RefineBudgets",
    "RefinementCoordinator",
    "RefinementOutcome",
    "RefinementPlanner",
    "ReplyParseError",
    "ReviewChoice",
    "ReviewDecided",
    "ReviewRequested",
    "ReviewVerdict",
    "RollbackOutcome",
    "SearchHit",
    "SessionRefinement",
    "TrajectoryItem",
    "TruncatedReply",
    "UnknownRefinement",
    "Windows",
    "extract_json_object",
    "harness_of",
    "host_handlers",
    "message_ids",
    "needs_review",
    "refine_model",
    "register_host_ops",
    "render_trajectory",
    "trajectory_from_events",
]
