"""agent_core: sessions, the turn loop, the model client, prompt building and refinement.

Public names are resolved lazily: `import agent_core` imports nothing (the server answers
`initialize` and its first `session/new` before the turn events or the Agent's modules load), and
`openai`/`jupyter_client` load only when an `Agent` is really used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_core.agent import Agent
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
    from agent_core.history.transcript import SessionPage, SessionStore, SessionSummary
    from agent_core.ports import EditorPort, NoEditor, PermissionDecision, PermissionRequest
    from agent_core.session import Session
    from agent_core.turn.titles import cell_title
    from harness_store import HarnessStore, Proposal, RefinementResult, merge, render_overview

_LAZY: dict[str, str] = {
    "AgentConfig": "agent_core.config.loader",
    "load_config": "agent_core.config.loader",
    "KernelBackendUnavailable": "agent_core.errors",
    "ModelError": "agent_core.errors",
    "PermissionRequestFailed": "agent_core.errors",
    "SessionInUse": "agent_core.errors",
    "SessionNotFound": "agent_core.errors",
    "CellClear": "agent_core.events",
    "CellDisplay": "agent_core.events",
    "CellFinished": "agent_core.events",
    "CellOutput": "agent_core.events",
    "CellStarted": "agent_core.events",
    "FileEdited": "agent_core.events",
    "ImagePart": "agent_core.events",
    "MessageChunk": "agent_core.events",
    "PlanChanged": "agent_core.events",
    "PlanEntry": "agent_core.events",
    "PromptPart": "agent_core.events",
    "RefinementReported": "agent_core.events",
    "ResourceLinkPart": "agent_core.events",
    "ResourcePart": "agent_core.events",
    "StopReason": "agent_core.events",
    "TextPart": "agent_core.events",
    "ThoughtChunk": "agent_core.events",
    "TitleChanged": "agent_core.events",
    "TurnEnded": "agent_core.events",
    "TurnEvent": "agent_core.events",
    "UsageReport": "agent_core.events",
    "UserMessage": "agent_core.events",
    "EditorPort": "agent_core.ports",
    "NoEditor": "agent_core.ports",
    "PermissionDecision": "agent_core.ports",
    "PermissionRequest": "agent_core.ports",
    "cell_title": "agent_core.turn.titles",
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
