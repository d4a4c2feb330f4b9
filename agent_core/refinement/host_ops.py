"""Host handlers for the kernel's `refine.*` and `harness.*` calls.

Each takes the session's coordinator (which holds both stores) and the JSON arguments the kernel
sent, and returns something JSON-able. Errors a user can act on are raised as `HostOpError` with a
readable message; the bridge turns any exception into the kernel-side `HostError` with that text.
`register_host_ops` binds them on a session's host bridge.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from agent_core.refinement.coordinator import RefinementCoordinator
from agent_core.refinement.records import Scope
from harness_store import KINDS, HarnessEntry, HarnessState, Proposal, merge

Handler = Callable[[dict[str, Any]], Awaitable[Any]]

_WORD = re.compile(r"[a-z0-9]+")


class HostOpError(ValueError):
    """A kernel call with bad arguments; the message says what to change."""


def _scope(value: Any, *, allow_merged: bool = False) -> str:
    allowed = ("local", "global", "merged") if allow_merged else ("local", "global")
    scope = value if value is not None else ("merged" if allow_merged else "local")
    if scope not in allowed:
        raise HostOpError(f"scope must be one of {', '.join(allowed)}, not {scope!r}")
    return str(scope)


def _kind(value: Any) -> str | None:
    if value is not None and value not in KINDS:
        raise HostOpError(f"unknown kind {value!r}; use one of {', '.join(KINDS)}")
    return None if value is None else str(value)


def _entry_json(key: str, entry: HarnessEntry, *, full: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": entry.id,
        "key": key,
        "kind": entry.kind,
        "scope": entry.scope,
        "title": entry.title,
        "path": entry.path,
        "trust": entry.trust,
        "version": entry.version,
        "updated_at": entry.updated_at,
    }
    if full:
        body.update(
            content=entry.content,
            reference=entry.reference,
            arguments=entry.arguments,
            metadata=entry.metadata,
            source=entry.source,
            evidence=entry.evidence,
            created_at=entry.created_at,
        )
    else:
        body["summary"] = " ".join(entry.content.split())[:160]
    return body


def _visible(state: HarnessState, kind: str | None) -> list[tuple[str, HarnessEntry]]:
    """Entries the agent may see: rejected ones never come back through the kernel either."""
    kinds = [kind] if kind else list(KINDS)
    return [
        (key, entry)
        for k in kinds
        for key, entry in sorted(state.entries.get(k, {}).items())
        if entry.trust != "rejected"
    ]


async def _state(coordinator: RefinementCoordinator, scope: str) -> HarnessState:
    if scope == "local":
        return await anyio.to_thread.run_sync(coordinator.local_store.load)
    if scope == "global":
        return await anyio.to_thread.run_sync(coordinator.global_store.load)
    local = await anyio.to_thread.run_sync(coordinator.local_store.load)
    glob = await anyio.to_thread.run_sync(coordinator.global_store.load)
    return merge(glob, local)


# ---------------------------------------------------------------- refine.*


async def refine_run(coordinator: RefinementCoordinator, args: dict[str, Any]) -> dict[str, Any]:
    instructions = args.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise HostOpError("instructions must be a string or None")
    scope: Scope = "global" if _scope(args.get("scope")) == "global" else "local"
    return coordinator.schedule_from_cell(instructions, scope)


async def refine_status(coordinator: RefinementCoordinator, args: dict[str, Any]) -> dict[str, Any]:
    status = coordinator.status()
    return {
        "pending": status["pending"],
        "in_flight": status["in_flight"],
        "last": status["last"],
        "awaiting_review": status["awaiting_review"],
    }


# ---------------------------------------------------------------- harness.*


async def harness_list(coordinator: RefinementCoordinator, args: dict[str, Any]) -> list[dict[str, Any]]:
    state = await _state(coordinator, _scope(args.get("scope"), allow_merged=True))
    return [_entry_json(key, entry, full=False) for key, entry in _visible(state, _kind(args.get("kind")))]


async def harness_search(coordinator: RefinementCoordinator, args: dict[str, Any]) -> list[dict[str, Any]]:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise HostOpError("search needs a non-empty query string")
    limit = args.get("limit", 20)
    if not isinstance(limit, int) or limit <= 0:
        raise HostOpError("limit must be a positive integer")
    wanted = set(_WORD.findall(query.lower()))
    state = await _state(coordinator, "merged")
    scored: list[tuple[float, str, HarnessEntry]] = []
    for key, entry in _visible(state, _kind(args.get("kind"))):
        words = set(_WORD.findall(f"{entry.id} {entry.title} {entry.path} {entry.content}".lower()))
        hits = len(wanted & words)
        if hits:
            title_hits = len(wanted & set(_WORD.findall(entry.title.lower())))
            scored.append((hits + 0.5 * title_hits, key, entry))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [_entry_json(key, entry, full=False) for _, key, entry in scored[:limit]]


async def harness_show(coordinator: RefinementCoordinator, args: dict[str, Any]) -> dict[str, Any]:
    entry_id = args.get("id")
    if not isinstance(entry_id, str) or not entry_id:
        raise HostOpError("show needs an entry id")
    state = await _state(coordinator, "merged")
    matches = [(k, e) for k, e in _visible(state, _kind(args.get("kind"))) if entry_id in (k, e.id)]
    if not matches:
        raise HostOpError(f"no harness entry {entry_id!r}; harness.list() shows the ids")
    if len(matches) > 1 and entry_id not in {k for k, _ in matches}:
        kinds = ", ".join(e.kind for _, e in matches)
        raise HostOpError(f"{entry_id!r} names entries of several kinds ({kinds}); pass kind=")
    exact = [m for m in matches if m[0] == entry_id]
    key, entry = (exact or matches)[0]
    return _entry_json(key, entry, full=True)


async def harness_write(coordinator: RefinementCoordinator, args: dict[str, Any]) -> dict[str, Any]:
    """create/update/delete one entry through the same store API (and review policy) as refinements."""
    edit = args.get("edit")
    if not isinstance(edit, dict):
        raise HostOpError("write needs an edit object")
    scope: Scope = "global" if _scope(args.get("scope")) == "global" else "local"
    store = coordinator.global_store if scope == "global" else coordinator.local_store
    action = edit.get("action")
    if action == "update" and isinstance(edit.get("id"), str):
        # The kernel API updates only the fields given; the store wants a full title and content.
        current = (await anyio.to_thread.run_sync(store.load)).get(str(edit.get("kind")), edit["id"])
        if current is not None:
            for name in ("title", "content"):
                edit.setdefault(name, getattr(current, name))
    title = edit.get("title") or edit.get("id") or ""
    proposal = Proposal.model_validate(
        {
            "summary": f"{action} {edit.get('kind')} {title}".strip(),
            "rationale": edit.get("reason") or "written from a cell with the harness skill",
            "edits": [edit],
        }
    )
    # A write from a cell follows the review policy like any refinement: permitting the cell (maybe
    # once, for the whole session) is not a review of what it writes into the harness, so in ask
    # mode a local write waits for review too (ARCHITECTURE.md: "anything in ask mode").
    outcome = await coordinator.submit(proposal, scope=scope, trigger="model", baseline=None, source="agent")
    # `id` names what the write became: the refinement to roll back, or the proposal awaiting review.
    return {"id": outcome.refinement_id or outcome.proposal_id or outcome.job_id, **outcome.to_json()}


OPS: dict[str, Callable[[RefinementCoordinator, dict[str, Any]], Awaitable[Any]]] = {
    "refine.run": refine_run,
    "refine.status": refine_status,
    "harness.list": harness_list,
    "harness.search": harness_search,
    "harness.show": harness_show,
    "harness.write": harness_write,
}


def host_handlers(coordinator: RefinementCoordinator) -> dict[str, Handler]:
    """Each op bound to this session's coordinator, ready for `host_bridge.register(op, handler)`."""

    def bind(op: Callable[[RefinementCoordinator, dict[str, Any]], Awaitable[Any]]) -> Handler:
        async def handler(args: dict[str, Any]) -> Any:
            return await op(coordinator, args)

        return handler

    return {name: bind(op) for name, op in OPS.items()}


def register_host_ops(bridge: Any, coordinator: RefinementCoordinator) -> None:
    """Register `refine.*` and `harness.*` on a session's host bridge."""
    for name, handler in host_handlers(coordinator).items():
        bridge.register(name, handler)
