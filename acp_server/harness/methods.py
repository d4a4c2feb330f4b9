"""The `_harness/*` extension methods (ACP.md "Harness extension methods"), camelCase JSON.

`_harness/state|history|show|rollback|review|why|status|await_quiescence`, each taking `sessionId`, plus
the `_harness/quiescence` notification (sent by events.py). Each handler checks its params into a
typed request, asks the session's `HarnessSurface` and shapes the answer (wire.py). Registered by
`install`, which the composition root passes to `serve_stdio(extensions=...)`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING

import anyio

from acp_server.errors import AcpError
from acp_server.harness.cards import QUIESCENCE
from acp_server.harness.names import HARNESS_METHODS
from acp_server.harness.wire import (
    already_rolled_back,
    await_quiescence_answer,
    history_answer,
    outcome_answer,
    result_full,
    rollback_refused,
    state_answer,
    status_answer,
)
from acp_server.subagent_cards import hub_of, running_children

if TYPE_CHECKING:
    from acp_server.context import HarnessHost
    from acp_server.open_session import OpenSession
    from acp_server.registry import RequestContext
    from agent_core.refinement.records import ReviewChoice

log = logging.getLogger(__name__)

JsonObject = dict[str, object]
MAX_AWAIT_MS = 3_600_000


def _params(params: object, method: str) -> JsonObject:
    if not isinstance(params, dict):
        raise AcpError.invalid_params(f"Invalid params for {method}: params must be an object")
    return params


def _require_str(params: JsonObject, key: str, method: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise AcpError.invalid_params(
            f"Invalid params for {method}: {key}: must be a non-empty string",
            {"errors": [{"loc": [key], "msg": "must be a non-empty string", "type": "value_error"}]},
        )
    return value


@dataclass(frozen=True)
class _Request:
    """Checked params: the method name, the session they name and the rest of the object."""

    method: str
    session_id: str
    params: JsonObject

    @classmethod
    def parse(cls, params: object, method: str) -> _Request:
        body = _params(params, method)
        return cls(method, _require_str(body, "sessionId", method), body)

    def require_str(self, key: str) -> str:
        return _require_str(self.params, key, self.method)


_Handler = Callable[[_Request, "OpenSession"], Awaitable[JsonObject]]


def _decision(value: object) -> ReviewChoice:
    if value == "apply":
        return "apply"
    if value == "apply_always":
        return "apply_always"
    if value == "reject":
        return "reject"
    if value == "reject_forever":
        return "reject_forever"
    raise AcpError.invalid_params("_harness/review: decision must be apply, reject or reject_forever")


def _surface() -> ModuleType:
    """agent_core's refinement surface, imported on first use (not at install: startup path).
    An `except _surface().X:` clause is evaluated only when an exception reaches it."""
    from agent_core.refinement import surface

    return surface


def install(server: HarnessHost) -> None:
    """Register the `_harness/*` methods on `server` and advertise `_harness/quiescence`.

    Imports nothing from agent_core: it runs at startup, and the handlers import it when called.
    """
    server.extension_notifications.append(QUIESCENCE)
    r = server.registry

    def method(name: str) -> Callable[[_Handler], _Handler]:
        def register(handler: _Handler) -> _Handler:
            async def handle(ctx: RequestContext, params: object) -> JsonObject:
                request = _Request.parse(params, name)
                return await handler(request, await server.open_session(request.session_id))

            r.request(name)(handle)
            return handler

        return register

    @method("_harness/state")
    async def state(request: _Request, opened: OpenSession) -> JsonObject:
        scope = request.params.get("scope", "merged")
        if scope != "local" and scope != "global" and scope != "project" and scope != "merged":
            raise AcpError.invalid_params("_harness/state: scope must be local, global, project or merged")
        if scope == "project" and not opened.harness.has_project:
            raise AcpError.invalid_params(
                "_harness/state: this session has no project harness (its cwd is not in a git repository)"
            )
        as_of = request.params.get("asOf")
        try:
            current = await opened.harness.state(scope, as_of=None if as_of is None else str(as_of))
        except _surface().RefinementNotFound:
            raise AcpError.invalid_params(
                f"_harness/state: no refinement {as_of!r} in this session's or the global harness"
            ) from None
        return state_answer(current)

    @method("_harness/history")
    async def history(request: _Request, opened: OpenSession) -> JsonObject:
        limit = request.params.get("limit", 50)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise AcpError.invalid_params("_harness/history: limit must be a positive integer")
        cursor = request.params.get("cursor")
        try:
            page = await opened.harness.history(limit, None if cursor is None else str(cursor))
        except _surface().RefinementNotFound:
            raise AcpError.invalid_params(f"_harness/history: unknown cursor {cursor!r}") from None
        return history_answer(page)

    @method("_harness/show")
    async def show(request: _Request, opened: OpenSession) -> JsonObject:
        refinement_id = request.require_str("refinementId")
        try:
            found = await opened.harness.find(refinement_id)
        except _surface().RefinementNotFound:
            raise AcpError.invalid_params(
                f"_harness/show: no refinement {refinement_id!r} in this session's or the global harness"
            ) from None
        return result_full(found.result)

    @method("_harness/rollback")
    async def rollback(request: _Request, opened: OpenSession) -> JsonObject:
        refinement_id = request.require_str("refinementId")
        force = request.params.get("force", False) is True
        try:
            outcome = await opened.harness.rollback(refinement_id, force=force)
        except _surface().RefinementNotFound:
            raise AcpError.invalid_params(
                f"_harness/rollback: no refinement {refinement_id!r} in this session's or the global harness"
            ) from None
        if outcome.rolled_back_by is not None:
            raise AcpError.from_error(already_rolled_back(refinement_id, outcome.rolled_back_by))
        result = outcome.result
        assert result is not None
        if outcome.refused:
            raise AcpError.from_error(rollback_refused(refinement_id, result, force=force))
        return result_full(result)

    @method("_harness/review")
    async def review(request: _Request, opened: OpenSession) -> JsonObject:
        proposal_id = request.require_str("proposalId")
        decision = _decision(request.params.get("decision"))
        edit_ids = request.params.get("editIds")
        if edit_ids is not None and not (
            isinstance(edit_ids, list) and all(isinstance(i, str) for i in edit_ids)
        ):
            raise AcpError.invalid_params("_harness/review: editIds must be a list of entry ids")
        try:
            outcome = await opened.harness.decide(
                proposal_id, decision, edit_ids=None if edit_ids is None else [str(i) for i in edit_ids]
            )
        except _surface().HarnessStoreError as exc:
            raise AcpError.invalid_params(f"_harness/review: {exc}") from None
        answer = outcome_answer(outcome)
        if outcome.refinement_id:
            try:
                found = await opened.harness.find(outcome.refinement_id)
            except _surface().RefinementNotFound:
                pass
            else:
                answer["result"] = result_full(found.result)
        return answer

    @method("_harness/why")
    async def why(request: _Request, opened: OpenSession) -> JsonObject:
        from agent_core.trust_commands import why_answer

        entry_id = request.require_str("entryId")
        kind = request.params.get("kind")
        kinds = _surface().KINDS
        if kind is not None and (not isinstance(kind, str) or kind not in kinds):
            raise AcpError.invalid_params(f"_harness/why: kind must be one of {', '.join(kinds)}")
        answer = await anyio.to_thread.run_sync(partial(why_answer, opened.session, entry_id, kind=kind))
        return answer.to_json()

    @method("_harness/status")
    async def status(request: _Request, opened: OpenSession) -> JsonObject:
        answer = status_answer(opened.harness.status())
        if running := running_children(opened.session):  # background children (only when any)
            answer["runningSubagents"] = running
            answer["quiescent"] = False  # quiescence covers every background job the user waits on
        return answer

    @method("_harness/await_quiescence")
    async def await_quiescence(request: _Request, opened: OpenSession) -> JsonObject:
        timeout_ms = request.params.get("timeoutMs", 30_000)
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float) or timeout_ms < 0:
            raise AcpError.invalid_params(
                "_harness/await_quiescence: timeoutMs must be a non-negative number"
            )
        timeout = min(float(timeout_ms), MAX_AWAIT_MS) / 1000.0
        deadline = anyio.current_time() + timeout
        quiescent = await opened.harness.wait_quiescent(timeout)
        hub = hub_of(opened.session)
        if quiescent and hub is not None:
            # Background children are work the user waits on too (ACP.md): settled = both.
            left = max(0.0, deadline - anyio.current_time())
            quiescent = await hub.wait_settled(opened.session.id, left) and opened.harness.status().quiescent
        return await_quiescence_answer(quiescent, opened.harness.status().last_refinement_id)

    registered = tuple(n for n in r.names() if n.startswith("_harness/"))
    if registered != HARNESS_METHODS:  # what the early `initialize` advertised (names.py)
        raise RuntimeError(f"_harness/* methods {registered} differ from names.py's {HARNESS_METHODS}")


__all__ = ["install"]
