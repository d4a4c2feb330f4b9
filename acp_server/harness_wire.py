"""Harness records as camelCase wire JSON (the shapes of the `_harness/*` answers)."""

from __future__ import annotations

from typing import Any

# User data inside entries keeps its own keys (a skill's arguments contract is not ours to rename).
_OPAQUE = frozenset({"reference", "arguments", "metadata"})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def to_wire(value: Any) -> Any:
    """snake_case model dumps -> camelCase JSON (user data under reference/arguments/metadata untouched)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        return {
            _camel(k): (v if k in _OPAQUE else to_wire(v))
            for k, v in value.items()
            if v is not None or k in ("before", "after")
        }
    if isinstance(value, list | tuple):
        return [to_wire(v) for v in value]
    return value


def result_summary(result: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": result.id,
        "summary": result.summary,
        "scope": result.scope,
        "trigger": result.trigger,
        "createdAt": result.created_at,
        "edits": [
            {
                "action": e.action,
                "kind": e.kind,
                "id": e.id,
                "applied": e.applied,
                **({"error": e.error} if e.error else {}),
            }
            for e in result.applied_edits
        ],
    }
    if result.rollback_of:
        body["rollbackOf"] = result.rollback_of
    if getattr(result, "review_of", None):
        body["reviewOf"] = result.review_of
    return body


def result_full(result: Any) -> dict[str, Any]:
    body: dict[str, Any] = to_wire(result)
    body["edits"] = body.pop("appliedEdits", [])
    body["applied"] = bool(result.applied)
    return body
