"""The JSON shapes the review gate and the planner answer, as JSON Schemas for structured output.

Sent as the request's `response_format` (agent_core/model.py chooses the form the endpoint takes),
so a server that constrains its output to a schema -- llama.cpp applies it as a grammar, OpenAI as
structured output -- cannot answer prose, a fenced block or half an object. Small local models need
that most: without it their planner replies are often not JSON at all. The schemas describe what
the prompts ask for (prompts.py), no more: the parser (extract.py, harness_store's models) stays
the judge, so an endpoint that ignores the schema loses nothing. Strings carry no `maxLength` on
purpose: llama.cpp writes it out as one nested grammar rule per character, and its grammar parser
fails on a few hundred of them (llama-cpp-python's server dies). Arrays are bounded.
"""

from __future__ import annotations

from typing import Any

_TEXT: dict[str, Any] = {"type": "string"}

REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "should_refine": {"type": "boolean"},
        "rationale": _TEXT,
        "instructions": _TEXT,
        "scope": {"type": "string", "enum": ["local", "global", "project"]},
    },
    "required": ["should_refine", "rationale", "scope"],
    "additionalProperties": False,
}

_KIND: dict[str, Any] = {"type": "string", "enum": ["prompt", "memory", "skill", "subagent"]}
_LIST: dict[str, Any] = {"type": "array", "items": _TEXT, "maxItems": 8}
# What any edit may carry besides its action, kind, id, title and content.
_DETAILS: dict[str, Any] = {
    "path": _TEXT,
    "reference": {"type": "object"},
    "arguments": {"type": "object"},
    "reason": _TEXT,
    "evidence": _LIST,
    "scope": {"type": "string", "enum": ["local", "global", "project"]},
    "about": _LIST,
}


def _edit(action: str, required: list[str], fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"action": {"type": "string", "const": action}, "kind": _KIND, **fields, **_DETAILS},
        "required": ["action", "kind", *required],
        "additionalProperties": False,
    }


# One shape per action, each with the fields the store needs for it: a constrained model cannot
# answer a create without its title and content, or an update without the id it changes.
_EDIT: dict[str, Any] = {
    "anyOf": [
        _edit("create", ["title", "content"], {"title": _TEXT, "content": _TEXT}),
        _edit("update", ["id"], {"id": _TEXT, "title": _TEXT, "content": _TEXT}),
        _edit("delete", ["id"], {"id": _TEXT}),
    ]
}

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": _TEXT,
        "rationale": _TEXT,
        "expected_outcome": _TEXT,
        "edits": {"type": "array", "items": _EDIT, "maxItems": 8},
    },
    "required": ["summary", "edits"],
    "additionalProperties": False,
}
