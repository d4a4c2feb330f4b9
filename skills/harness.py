"""`harness`: read and write the continual harness from a cell.

    harness.list()                         # every entry (global and this session's), ranked
    harness.list("memory")                 # one kind
    harness.search("pytest")               # entries matching words
    harness.show("run_tests")              # one entry in full
    harness.create("memory", "Test command", "Run `make check`, not pytest directly.")
    harness.update("memory", "test_command", content="...")
    harness.delete("memory", "test_command")

Writes go through the host to the same store API as refinements, so they are versioned, shown as a
refinement, and can be rolled back with `/rollback <id>`. They are local to this session unless
`global_=True`. A write may wait for the user's review instead (a global one by default, any in
ask mode, per the session's review policy); the result's `status` then says `pending_review`.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kernel_bridge import hostclient as bridge

if TYPE_CHECKING:
    from skills._awaitable import JsonObject, JsonValue

__all__ = ["create", "delete", "list", "search", "show", "update"]

KINDS = ("prompt", "memory", "skill", "subagent")


def _kind(kind: str | None) -> str | None:
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    return kind


def list(kind: str | None = None, scope: str = "merged") -> builtins.list[JsonObject]:
    """Entries as dicts (id, kind, scope, title, trust, ...); `scope` is merged, local or global."""
    return builtins.list(bridge.call("harness.list", kind=_kind(kind), scope=scope))


def search(query: str, kind: str | None = None, limit: int = 20) -> builtins.list[JsonObject]:
    """Entries whose title, content or path share words with `query`, best first."""
    return builtins.list(bridge.call("harness.search", query=query, kind=_kind(kind), limit=limit))


def show(id: str, kind: str | None = None) -> JsonObject:
    """One entry in full (content, reference, arguments, evidence, version)."""
    return dict(bridge.call("harness.show", id=id, kind=_kind(kind)))


def create(
    kind: str,
    title: str,
    content: str,
    *,
    id: str | None = None,
    path: str | None = None,
    reference: Mapping[str, JsonValue] | None = None,
    arguments: Mapping[str, JsonValue] | None = None,
    metadata: Mapping[str, JsonValue] | None = None,
    reason: str | None = None,
    global_: bool = False,
    examples: builtins.list[Mapping[str, JsonValue]] | None = None,
    scope: str | None = None,
    evidence: builtins.list[str] | None = None,
) -> JsonObject:
    """Create an entry; returns the refinement record (its id rolls the write back).

    `evidence`: ids of the conversation's messages that support it (`/why` quotes them).

    A skill's `examples` (`{"args": [...], "kwargs": {...}, "expect": ...}` or `"predicate"`) run in
    a scratch kernel before it is written; a failing one refuses the write. `scope` (`local`,
    `global`, `project`) overrides `global_`.
    """
    edit = {
        "action": "create",
        "kind": _kind(kind),
        "id": id,
        "title": title,
        "content": content,
        "path": path,
        "reference": reference,
        "arguments": arguments,
        "metadata": metadata,
        "reason": reason,
        "examples": examples,
        "evidence": evidence,
    }
    return _write(edit, global_, scope)


def update(
    kind: str,
    id: str,
    *,
    title: str | None = None,
    content: str | None = None,
    path: str | None = None,
    reference: Mapping[str, JsonValue] | None = None,
    arguments: Mapping[str, JsonValue] | None = None,
    metadata: Mapping[str, JsonValue] | None = None,
    reason: str | None = None,
    global_: bool = False,
    examples: builtins.list[Mapping[str, JsonValue]] | None = None,
    scope: str | None = None,
) -> JsonObject:
    """Change the given fields of an entry (the others keep their values)."""
    edit = {
        "action": "update",
        "kind": _kind(kind),
        "id": id,
        "title": title,
        "content": content,
        "path": path,
        "reference": reference,
        "arguments": arguments,
        "metadata": metadata,
        "reason": reason,
        "examples": examples,
    }
    return _write(edit, global_, scope)


def delete(
    kind: str, id: str, *, reason: str | None = None, global_: bool = False, scope: str | None = None
) -> JsonObject:
    """Delete an entry (rollback re-creates it)."""
    return _write({"action": "delete", "kind": _kind(kind), "id": id, "reason": reason}, global_, scope)


def _write(edit: Mapping[str, object], global_: bool, scope: str | None = None) -> JsonObject:
    # trust: `scope` names any scope (project too); the host refuses one it does not serve.
    clean = {k: v for k, v in edit.items() if v is not None}
    where = scope if scope is not None else ("global" if global_ else "local")
    return dict(bridge.call("harness.write", edit=clean, scope=where))
