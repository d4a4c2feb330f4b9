"""Host handlers for the kernel's `refine.*` and `harness.*` calls.

Each takes the session's `HarnessSurface` (both stores, through the coordinator) and the JSON
arguments the kernel sent, checks them, asks the surface, and returns something JSON-able. Errors a
user can act on are raised as `HostOpError` with a readable message; the bridge turns any exception
into the kernel-side `HostError` with that text. `register_host_ops` binds them on a session's host
bridge.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from agent_core.refinement.records import Scope
from agent_core.refinement.surface import HarnessSurface, StateScope, neutralized, visible_entries
from harness_store import KINDS, HarnessEntry, Proposal

if TYPE_CHECKING:
    from kernel_bridge.hostbridge import Handler as BridgeHandler

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
Op = Callable[[HarnessSurface, dict[str, Any]], Awaitable[Any]]


class HostOpError(ValueError):
    """A kernel call with bad arguments; the message says what to change."""


class _Registers(Protocol):
    def register(self, op: str, handler: BridgeHandler) -> None: ...


def _scope(value: Any, surface: HarnessSurface | None = None) -> Scope:
    scope = value if value is not None else "local"
    if scope not in ("local", "global", "project"):
        raise HostOpError(f"scope must be one of local, global, project, not {scope!r}")
    if scope == "project":
        if surface is not None and not surface.has_project:
            raise HostOpError("this session has no project harness: its cwd is not in a git repository")
        return "project"
    return "global" if scope == "global" else "local"


def _state_scope(value: Any, surface: HarnessSurface | None = None) -> StateScope:
    scope = value if value is not None else "merged"
    if scope == "local":
        return "local"
    if scope == "global":
        return "global"
    if scope == "project":
        if surface is not None and not surface.has_project:
            raise HostOpError("this session has no project harness: its cwd is not in a git repository")
        return "project"
    if scope == "merged":
        return "merged"
    raise HostOpError(f"scope must be one of local, global, project, merged, not {scope!r}")


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
        # why the prompt shows this entry altered (empty: as written).
        "neutralized": list(neutralized(entry)),
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


# ---------------------------------------------------------------- refine.*


async def refine_run(surface: HarnessSurface, args: dict[str, Any]) -> dict[str, Any]:
    instructions = args.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise HostOpError("instructions must be a string or None")
    return surface.schedule(instructions, _scope(args.get("scope"), surface))


async def refine_status(surface: HarnessSurface, args: dict[str, Any]) -> dict[str, Any]:
    status = surface.status()
    return {
        "pending": status.pending,
        "in_flight": status.in_flight,
        "last": status.last.to_json() if status.last else None,
        "awaiting_review": status.awaiting_review,
    }


# ---------------------------------------------------------------- harness.*


async def harness_list(surface: HarnessSurface, args: dict[str, Any]) -> list[dict[str, Any]]:
    state = await surface.state(_state_scope(args.get("scope"), surface))
    return [
        _entry_json(key, entry, full=False) for key, entry in visible_entries(state, _kind(args.get("kind")))
    ]


async def harness_search(surface: HarnessSurface, args: dict[str, Any]) -> list[dict[str, Any]]:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise HostOpError("search needs a non-empty query string")
    limit = args.get("limit", 20)
    if not isinstance(limit, int) or limit <= 0:
        raise HostOpError("limit must be a positive integer")
    hits = await surface.search(query, kind=_kind(args.get("kind")), limit=limit)
    return [_entry_json(hit.key, hit.entry, full=False) for hit in hits]


async def harness_show(surface: HarnessSurface, args: dict[str, Any]) -> dict[str, Any]:
    entry_id = args.get("id")
    if not isinstance(entry_id, str) or not entry_id:
        raise HostOpError("show needs an entry id")
    state = await surface.state("merged")
    matches = [(k, e) for k, e in visible_entries(state, _kind(args.get("kind"))) if entry_id in (k, e.id)]
    if not matches:
        raise HostOpError(f"no harness entry {entry_id!r}; harness.list() shows the ids")
    if len(matches) > 1 and entry_id not in {k for k, _ in matches}:
        kinds = ", ".join(e.kind for _, e in matches)
        raise HostOpError(f"{entry_id!r} names entries of several kinds ({kinds}); pass kind=")
    exact = [m for m in matches if m[0] == entry_id]
    key, entry = (exact or matches)[0]
    return _entry_json(key, entry, full=True)


async def harness_write(surface: HarnessSurface, args: dict[str, Any]) -> dict[str, Any]:
    """create/update/delete one entry through the same store API (and review policy) as refinements."""
    edit = args.get("edit")
    if not isinstance(edit, dict):
        raise HostOpError("write needs an edit object")
    scope = _scope(args.get("scope"), surface)
    action = edit.get("action")
    if action == "update" and isinstance(edit.get("id"), str):
        # The kernel API updates only the fields given; the store wants a full title and content.
        current = await surface.current_entry(scope, str(edit.get("kind")), edit["id"])
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
    # mode a local write waits for review too: in ask mode everything waits for the user.
    outcome = await surface.write(proposal, scope=scope)
    # `id` names what the write became: the refinement to roll back, or the proposal awaiting review.
    return {"id": outcome.refinement_id or outcome.proposal_id or outcome.job_id, **outcome.to_json()}


OPS: dict[str, Op] = {
    "refine.run": refine_run,
    "refine.status": refine_status,
    "harness.list": harness_list,
    "harness.search": harness_search,
    "harness.show": harness_show,
    "harness.write": harness_write,
}


def host_handlers(surface: HarnessSurface) -> dict[str, Handler]:
    """Each op bound to this session's harness surface, ready for `host_bridge.register(op, handler)`."""

    def bind(op: Op) -> Handler:
        async def handler(args: dict[str, Any]) -> Any:
            return await op(surface, args)

        return handler

    return {name: bind(op) for name, op in OPS.items()}


def register_host_ops(bridge: _Registers, surface: HarnessSurface) -> None:
    """Register `refine.*` and `harness.*` on a session's host bridge."""
    for name, handler in host_handlers(surface).items():
        bridge.register(name, handler)
