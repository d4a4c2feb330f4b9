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

from collections.abc import Collection, Mapping
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


# Past this many entries the ids are left free (a grammar of thousands of alternatives costs more
# than the refusals of an unknown id it saves).
ID_ENUM_LIMIT = 200


def _edit(
    action: str, required: list[str], fields: dict[str, Any], kind: dict[str, Any] = _KIND
) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"action": {"type": "string", "const": action}, "kind": kind, **fields, **_DETAILS},
        "required": ["action", "kind", *required],
        "additionalProperties": False,
    }


def _changes(kind: dict[str, Any], known: dict[str, Any]) -> list[dict[str, Any]]:
    """The update and delete shapes for entries of `kind` whose ids are `known`."""
    fields = {"id": known, "title": _TEXT, "content": _TEXT}
    return [
        _edit("update", ["id", "title", "content"], fields, kind),
        _edit("delete", ["id"], {"id": known}, kind),
    ]


def plan_schema(entry_ids: Mapping[str, Collection[str]] | None = None) -> dict[str, Any]:
    """The planner's answer, one edit shape per action with the fields the store needs for it (a
    create or an update its title and content, an update or a delete its id). An update or delete
    may only name an entry that exists, with its own kind (`entry_ids`: kind -> the ids of the
    store being refined); with no entries there is nothing to update, and only creates are offered."""
    shapes = [_edit("create", ["title", "content"], {"title": _TEXT, "content": _TEXT})]
    known = {kind: sorted(set(ids)) for kind, ids in (entry_ids or {}).items() if ids}
    if sum(len(ids) for ids in known.values()) > ID_ENUM_LIMIT:
        shapes += _changes(_KIND, _TEXT)
    else:
        for kind, ids in sorted(known.items()):
            shapes += _changes({"type": "string", "const": kind}, {"type": "string", "enum": ids})
    return {
        "type": "object",
        "properties": {
            "summary": _TEXT,
            "rationale": _TEXT,
            "expected_outcome": _TEXT,
            # the id of the failed cell or gate the edits would have prevented (replayed to check it)
            "fixes": _TEXT,
            # checked when a later turn's cells run `command`: hit if that turn passes, miss if not
            "prediction": {
                "type": "object",
                "properties": {"command": _TEXT, "expect": _TEXT},
                "required": ["command"],
                "additionalProperties": False,
            },
            "edits": {"type": "array", "items": {"anyOf": shapes}, "maxItems": 8},
        },
        "required": ["summary", "edits"],
        "additionalProperties": False,
    }


# The curator's model pass (curation_model.py): merges and generalizations into existing entries.
CURATOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "merges": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"kind": _KIND, "id": _TEXT, "into": _TEXT, "reason": _TEXT},
                "required": ["kind", "id", "into"],
                "additionalProperties": False,
            },
            "maxItems": 20,
        },
        "generalizations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"kind": _KIND, "ids": _LIST, "into": _TEXT, "reason": _TEXT},
                "required": ["kind", "ids", "into"],
                "additionalProperties": False,
            },
            "maxItems": 20,
        },
    },
    "required": ["merges", "generalizations"],
    "additionalProperties": False,
}
