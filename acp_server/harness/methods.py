"""The `_harness/*` extension methods (docs/architecture.md lists them), camelCase JSON.

`_harness/state|history|show|rollback|review|why|status|await_quiescence`, each taking `sessionId`, plus
the `_harness/quiescence` notification (sent by events.py). Each handler receives its params as its
method's typed model (params.py), asks the session's `HarnessSurface` and shapes the answer
(wire.py). Registered by `install`, which the composition root passes to `serve_stdio(extensions=...)`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar, cast

import anyio

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
from acp_server.protocol.errors import AcpError
from acp_server.sessions.background import status_fields
from acp_server.turn.subagent_cards import hub_of, needing_action

if TYPE_CHECKING:
    from acp_server.harness.params import (
        AwaitQuiescenceParams,
        HarnessParams,
        HistoryParams,
        ReviewParams,
        RollbackParams,
        ShowParams,
        StateParams,
        StatusParams,
        WhyParams,
    )
    from acp_server.ports import HarnessHost, OpenSession
    from acp_server.protocol.registry import ParamsReader, RequestContext

log = logging.getLogger(__name__)

JsonObject = dict[str, object]
P = TypeVar("P", bound="HarnessParams")


async def _read(params: JsonObject, method: str) -> HarnessParams:
    from acp_server.harness.params import read  # pydantic: first `_harness/*` call, not startup

    return read(method, params)


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

    def method(name: str) -> Callable[[Callable[[P, OpenSession], Awaitable[JsonObject]]], None]:
        """Register the decorated `(params, opened session)` handler for `name`; its params
        model is `params.MODELS[name]` (the one its annotation names)."""

        def register(handler: Callable[[P, OpenSession], Awaitable[JsonObject]]) -> None:
            async def handle(ctx: RequestContext, request: P) -> JsonObject:
                return await handler(request, await server.open_session(request.session_id))

            r.request(name, reader=cast("ParamsReader[P]", _read))(handle)

        return register

    @method("_harness/state")
    async def state(request: StateParams, opened: OpenSession) -> JsonObject:
        scope, as_of = request.scope, request.as_of
        if scope == "project" and not opened.harness.has_project:
            raise AcpError.invalid_params(
                "_harness/state: this session has no project harness (its cwd is not in a git repository)"
            )
        try:
            current = await opened.harness.state(scope, as_of=as_of)
        except _surface().RefinementNotFound:
            raise AcpError.invalid_params(
                f"_harness/state: no refinement {as_of!r} in this session's or the global harness"
            ) from None
        from acp_server.harness.state_pages import StateQuery
        from agent_core.trust.entry_counters import home_counters, lookup

        query = StateQuery(request.session_id, scope, as_of, request.kind)
        counted = await anyio.to_thread.run_sync(home_counters, opened.session.agent_config.home)

        def counters(entry_id: str, entry_scope: str) -> JsonObject:
            return lookup(counted, entry_id, entry_scope).to_json()

        return state_answer(current, query, request.cursor, request.limit, counters)

    @method("_harness/history")
    async def history(request: HistoryParams, opened: OpenSession) -> JsonObject:
        cursor = request.cursor
        try:
            page = await opened.harness.history(request.limit, cursor)
        except _surface().RefinementNotFound:
            raise AcpError.invalid_params(f"_harness/history: unknown cursor {cursor!r}") from None
        return history_answer(page)

    @method("_harness/show")
    async def show(request: ShowParams, opened: OpenSession) -> JsonObject:
        refinement_id = request.refinement_id
        try:
            found = await opened.harness.find(refinement_id)
        except _surface().RefinementNotFound:
            raise AcpError.invalid_params(
                f"_harness/show: no refinement {refinement_id!r} in this session's or the global harness"
            ) from None
        return result_full(found.result)

    @method("_harness/rollback")
    async def rollback(request: RollbackParams, opened: OpenSession) -> JsonObject:
        refinement_id, force = request.refinement_id, request.force
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
    async def review(request: ReviewParams, opened: OpenSession) -> JsonObject:
        try:
            outcome = await opened.harness.decide(
                request.proposal_id, request.decision, edit_ids=request.edit_ids
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
    async def why(request: WhyParams, opened: OpenSession) -> JsonObject:
        from agent_core.trust.commands import why_answer

        answer = await anyio.to_thread.run_sync(
            partial(why_answer, opened.session, request.entry_id, kind=request.kind)
        )
        return answer.to_json()

    @method("_harness/status")
    async def status(request: StatusParams, opened: OpenSession) -> JsonObject:
        answer = status_answer(opened.harness.status())
        answer.update(status_fields(opened.harness.quiescence()))  # background children count too
        if waiting := needing_action(opened.session):  # children waiting for a permission answer
            answer["subagentsNeedingAction"] = waiting
        return answer

    @method("_harness/await_quiescence")
    async def await_quiescence(request: AwaitQuiescenceParams, opened: OpenSession) -> JsonObject:
        timeout = request.timeout
        deadline = anyio.current_time() + timeout
        quiescent = await opened.harness.wait_quiescent(timeout)
        hub = hub_of(opened.session)
        if quiescent and hub is not None:
            # Background children are work the user waits on too: settled means both are idle.
            left = max(0.0, deadline - anyio.current_time())
            quiescent = (
                await hub.wait_settled(opened.session.id, left) and opened.harness.quiescence().quiescent
            )
        return await_quiescence_answer(quiescent, opened.harness.status().last_refinement_id)

    registered = tuple(n for n in r.names() if n.startswith("_harness/"))
    if registered != HARNESS_METHODS:  # what the early `initialize` advertised (names.py)
        raise RuntimeError(f"_harness/* methods {registered} differ from names.py's {HARNESS_METHODS}")


__all__ = ["install"]
