"""The names acp_server and the other packages code against, and the cost of importing them."""

from __future__ import annotations

import subprocess
import sys

import agent_core

CONTRACT = {
    "Agent", "AgentConfig", "load_config", "Session", "SessionStore", "SessionPage", "SessionSummary",
    "SessionNotFound", "ModelError", "EditorPort", "NoEditor", "PermissionRequest", "PermissionDecision",
    "TextPart", "ImagePart", "ResourcePart", "ResourceLinkPart", "PromptPart",
    "UserMessage", "MessageChunk", "ThoughtChunk", "CellStarted", "CellOutput", "CellDisplay", "CellClear",
    "FileEdited", "CellFinished", "UsageReport", "TitleChanged", "PlanChanged", "PlanEntry",
    "RefinementReported", "TurnEnded", "TurnEvent", "StopReason",
    "HarnessStore", "Proposal", "RefinementResult", "merge", "render_overview", "cell_title",
}  # fmt: skip


def test_every_contract_name_is_exported_and_resolves() -> None:
    assert CONTRACT <= set(agent_core.__all__)
    for name in sorted(CONTRACT):
        assert getattr(agent_core, name) is not None, name


def test_importing_agent_core_does_not_load_openai_or_jupyter() -> None:
    code = "import sys, agent_core; print('openai' in sys.modules, 'jupyter_client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_testing_helpers_are_exported() -> None:
    import agent_core.testing as testing

    for name in (
        "ScriptedModelServer",
        "text",
        "tool_call",
        "tool_calls",
        "reasoning",
        "length_cut",
        "refusal",
        "error",
        "stall",
        "drop",
        "usage",
    ):
        assert callable(getattr(testing, name)), name
