"""The `_harness/*` extension methods (ACP.md "Harness extension methods"), camelCase JSON.

`_harness/state|history|show|rollback|review|status|await_quiescence`, each taking `sessionId`, plus
the `_harness/quiescence` notification (sent by `refinement_review`). Registered by `install`, which
the composition root passes to `serve_stdio(extensions=...)`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

from acp_server.errors import INVALID_PARAMS, AcpError
from acp_server.harness_wire import result_full, result_summary, to_wire
from acp_server.refinement_review import QUIESCENCE, coordinator_of, settle_review_card, watch
from acp_server.registry import RequestContext
from acp_server.subagent_cards import running_children

if TYPE_CHECKING:
    from acp_server.methods import AcpServer, OpenSession

log = logging.getLogger(__name__)

ROLLBACK_REFUSED = -32010  # application error: the store refused the rollback (data names the edits)
MAX_AWAIT_MS = 3_600_000


def _require_str(params: dict[str, Any], key: str, method: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise AcpError.invalid_params(
            f"Invalid params for {method}: {key}: must be a non-empty string",
            {"errors": [{"loc": [key], "msg": "must be a non-empty string", "type": "value_error"}]},
        )
    return value


def _params(params: Any, method: str) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise AcpError.invalid_params(f"Invalid params for {method}: params must be an object")
    return params


async def _opened(server: AcpServer, params: dict[str, Any], method: str) -> OpenSession:
    return await server.open_session(_require_str(params, "sessionId", method))


def _stores(opened: OpenSession) -> list[Any]:
    return [opened.session.local_store, opened.session.global_store]


async def _store_with(opened: OpenSession, refinement_id: str) -> Any | None:
    for store in _stores(opened):
        if await anyio.to_thread.run_sync(store.get_refinement, refinement_id) is not None:
            return store
    return None


def install(server: AcpServer) -> None:
    """Register the `_harness/*` methods and the per-session watcher on `server`."""
    server.extension_notifications.append(QUIESCENCE)
    server.bind_hooks.append(lambda opened: watch(server, opened))
    r = server.registry

    @r.request("_harness/state")
    async def state(ctx: RequestContext, params: Any) -> dict[str, Any]:
        params = _params(params, "_harness/state")
        opened = await _opened(server, params, "_harness/state")
        scope = params.get("scope", "merged")
        if scope not in ("local", "global", "merged"):
            raise AcpError.invalid_params("_harness/state: scope must be local, global or merged")
        as_of = params.get("asOf")
        session = opened.session
        from agent_core import merge

        if as_of is not None:
            store = await _store_with(opened, str(as_of))
            if store is None:
                raise AcpError.invalid_params(
                    f"_harness/state: no refinement {as_of!r} in this session's or the global harness"
                )
            current = await anyio.to_thread.run_sync(store.state_as_of, str(as_of))
            tombstones: list[Any] = []
        else:
            local = await anyio.to_thread.run_sync(session.local_store.load)
            glob = await anyio.to_thread.run_sync(session.global_store.load)
            current = {"local": local, "global": glob}.get(scope) or merge(glob, local)
            tombstones = [
                *(local.tombstones if scope != "global" else []),
                *(glob.tombstones if scope != "local" else []),
            ]
        entries = [
            {"key": key, **to_wire(entry)}
            for kind in sorted(current.entries)
            for key, entry in sorted(current.entries[kind].items())
        ]
        return {"entries": entries, "tombstones": to_wire(tombstones)}

    @r.request("_harness/history")
    async def history(ctx: RequestContext, params: Any) -> dict[str, Any]:
        params = _params(params, "_harness/history")
        opened = await _opened(server, params, "_harness/history")
        limit = params.get("limit", 50)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise AcpError.invalid_params("_harness/history: limit must be a positive integer")
        cursor = params.get("cursor")
        records: list[Any] = []
        for store in _stores(opened):
            records.extend(await anyio.to_thread.run_sync(store.history, None))
        records.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        if cursor is not None:
            ids = [r.id for r in records]
            if cursor not in ids:
                raise AcpError.invalid_params(f"_harness/history: unknown cursor {cursor!r}")
            records = records[ids.index(cursor) + 1 :]
        page = records[:limit]
        answer: dict[str, Any] = {"refinements": [result_summary(r) for r in page]}
        if len(records) > limit:
            answer["nextCursor"] = page[-1].id
        return answer

    @r.request("_harness/show")
    async def show(ctx: RequestContext, params: Any) -> dict[str, Any]:
        params = _params(params, "_harness/show")
        opened = await _opened(server, params, "_harness/show")
        refinement_id = _require_str(params, "refinementId", "_harness/show")
        store = await _store_with(opened, refinement_id)
        if store is None:
            raise AcpError.invalid_params(
                f"_harness/show: no refinement {refinement_id!r} in this session's or the global harness"
            )
        result = await anyio.to_thread.run_sync(store.get_refinement, refinement_id)
        return result_full(result)

    @r.request("_harness/rollback")
    async def rollback(ctx: RequestContext, params: Any) -> dict[str, Any]:
        params = _params(params, "_harness/rollback")
        opened = await _opened(server, params, "_harness/rollback")
        refinement_id = _require_str(params, "refinementId", "_harness/rollback")
        force = params.get("force", False) is True
        coordinator = coordinator_of(opened)
        try:
            if coordinator is not None:
                result = await coordinator.rollback(refinement_id, force=force)
                await coordinator.flushed()
            else:
                store = await _store_with(opened, refinement_id)
                if store is None:
                    raise KeyError(refinement_id)
                result = await anyio.to_thread.run_sync(lambda: store.rollback(refinement_id, force=force))
        except KeyError:
            raise AcpError.invalid_params(
                f"_harness/rollback: no refinement {refinement_id!r} in this session's or the global harness"
            ) from None
        if not result.applied and result.errors:
            raise AcpError(
                ROLLBACK_REFUSED,
                f"rollback of {refinement_id} was refused: "
                + "; ".join(result.errors)
                + ("" if force else " (pass force: true to override)"),
                {"refinementId": refinement_id, "errors": result.errors, "result": result_full(result)},
            )
        return result_full(result)

    @r.request("_harness/review")
    async def review(ctx: RequestContext, params: Any) -> dict[str, Any]:
        params = _params(params, "_harness/review")
        opened = await _opened(server, params, "_harness/review")
        proposal_id = _require_str(params, "proposalId", "_harness/review")
        decision = params.get("decision")
        if decision not in ("apply", "apply_always", "reject", "reject_forever"):
            raise AcpError.invalid_params("_harness/review: decision must be apply, reject or reject_forever")
        edit_ids = params.get("editIds")
        if edit_ids is not None and not (
            isinstance(edit_ids, list) and all(isinstance(i, str) for i in edit_ids)
        ):
            raise AcpError.invalid_params("_harness/review: editIds must be a list of entry ids")
        coordinator = coordinator_of(opened)
        if coordinator is None:
            raise AcpError(INVALID_PARAMS, "_harness/review: refinement is not available in this session")
        try:
            outcome = await coordinator.decide(proposal_id, decision, edit_ids=edit_ids)
        except KeyError as exc:
            raise AcpError.invalid_params(f"_harness/review: {exc.args[0]}") from None
        await coordinator.flushed()
        await settle_review_card(server, opened, proposal_id, outcome)
        answer: dict[str, Any] = to_wire(outcome.to_json())
        if outcome.refinement_id:
            store = await _store_with(opened, outcome.refinement_id)
            if store is not None:
                result = await anyio.to_thread.run_sync(store.get_refinement, outcome.refinement_id)
                answer["result"] = result_full(result)
        return answer

    @r.request("_harness/status")
    async def status(ctx: RequestContext, params: Any) -> dict[str, Any]:
        params = _params(params, "_harness/status")
        opened = await _opened(server, params, "_harness/status")
        coordinator = coordinator_of(opened)
        if coordinator is None:
            return {"quiescent": True, "pending": 0, "inFlight": 0, "awaitingReview": 0}
        state = coordinator.status()
        answer = {
            "quiescent": state["quiescent"],
            "pending": state["pending"],
            "inFlight": state["in_flight"],
            "awaitingReview": state["awaiting_review"],
        }
        if state["last_refinement_id"]:
            answer["lastRefinementId"] = state["last_refinement_id"]
        if running := running_children(opened.session):  # issue 12: background children (only when any)
            answer["runningSubagents"] = running
        return answer

    @r.request("_harness/await_quiescence")
    async def await_quiescence(ctx: RequestContext, params: Any) -> dict[str, Any]:
        params = _params(params, "_harness/await_quiescence")
        opened = await _opened(server, params, "_harness/await_quiescence")
        timeout_ms = params.get("timeoutMs", 30_000)
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float) or timeout_ms < 0:
            raise AcpError.invalid_params(
                "_harness/await_quiescence: timeoutMs must be a non-negative number"
            )
        coordinator = coordinator_of(opened)
        if coordinator is None:
            return {"quiescent": True}
        quiescent = await coordinator.wait_quiescent(min(float(timeout_ms), MAX_AWAIT_MS) / 1000.0)
        answer: dict[str, Any] = {"quiescent": quiescent}
        if coordinator.last_refinement_id:
            answer["lastRefinementId"] = coordinator.last_refinement_id
        return answer
