"""Fakes that ship beside the real seams: a scripted OpenAI-compatible model endpoint.

Names are resolved lazily so `python -m agent_core.testing.scripted_model` does not import the
module twice (runpy warns when a package pre-imports the module it is asked to run).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_core.testing.scripted_model import (
        ScriptedModelServer,
        broken_stream,
        drop,
        error,
        length_cut,
        reasoning,
        refusal,
        response,
        stall,
        text,
        tool_call,
        tool_calls,
        usage,
    )

__all__ = [
    "ScriptedModelServer",
    "broken_stream",
    "drop",
    "error",
    "length_cut",
    "reasoning",
    "refusal",
    "response",
    "stall",
    "text",
    "tool_call",
    "tool_calls",
    "usage",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'agent_core.testing' has no attribute {name!r}")
    return getattr(importlib.import_module("agent_core.testing.scripted_model"), name)
