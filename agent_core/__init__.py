"""agent_core: sessions, the turn loop, the model client, prompt building and refinement.

Public names are resolved lazily: `import agent_core` stays cheap (the server must answer
`initialize` fast), and `openai`/`jupyter_client` load only when an `Agent` is really used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agent_core.config.loader import AgentConfig, load_config
from agent_core.errors import (
    KernelBackendUnavailable,
    ModelError,
    PermissionRequestFailed,
    SessionInUse,
    SessionNotFound,
)
from agent_core.events import (
    CellClear,
    CellDisplay,
    CellFinished,
    CellOutput,
    CellStarted,
    FileEdited,
    ImagePart,
    MessageChunk,
    PlanChanged,
    PlanEntry,
    PromptPart,
    RefinementReported,
    ResourceLinkPart,
    ResourcePart,
    StopReason,
    TextPart,
    ThoughtChunk,
    TitleChanged,
    TurnEnded,
    TurnEvent,
    UsageReport,
    UserMessage,
)
from agent_core.ports import EditorPort, NoEditor, PermissionDecision, PermissionRequest
from agent_core.turn.titles import cell_title

if TYPE_CHECKING:
    from agent_core.agent import Agent
    from agent_core.history.transcript import SessionPage, SessionStore, SessionSummary
    from agent_core.session import Session
    from harness_store import HarnessStore, Proposal, RefinementResult, merge, render_overview

_LAZY: dict[str, str] = {
    "Agent": "agent_core.agent",
    "Session": "agent_core.session",
    "SessionStore": "agent_core.history.transcript",
    "SessionPage": "agent_core.history.transcript",
    "SessionSummary": "agent_core.history.transcript",
    # harness names acp_server needs, re-exported so acp_server never imports harness_store
    "HarnessStore": "harness_store",
    "Proposal": "harness_store",
    "RefinementResult": "harness_store",
    "merge": "harness_store",
    "render_overview": "harness_store",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "AgentConfig",
    "CellClear",
    "CellDisplay",
    "CellFinished",
    "CellOutput",
    "CellStarted",
    "EditorPort",
    "FileEdited",
    "HarnessStore",
    "ImagePart",
    "KernelBackendUnavailable",
    "MessageChunk",
    "ModelError",
    "NoEditor",
    "PermissionDecision",
    "PermissionRequest",
    "PermissionRequestFailed",
    "PlanChanged",
    "PlanEntry",
    "PromptPart",
    "Proposal",
    "RefinementReported",
    "RefinementResult",
    "ResourceLinkPart",
    "ResourcePart",
    "Session",
    "SessionInUse",
    "SessionNotFound",
    "SessionPage",
    "SessionStore",
    "SessionSummary",
    "StopReason",
    "TextPart",
    "ThoughtChunk",
    "TitleChanged",
    "TurnEnded",
    "TurnEvent",
    "UsageReport",
    "UserMessage",
    "cell_title",
    "load_config",
    "merge",
    "render_overview",
]
