"""The method table: one line per JSON-RPC method, wrapped for `jsonrpcserver` dispatch.

Adding a method (for example a `_harness/*` extension) is one decorator:

    @registry.request("_harness/status", params_model=None)
    async def harness_status(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]: ...

`params_model` names an `acp.schema` model: params are validated with it (failures answer -32602
with the pydantic errors in `data`) and the handler receives the model instance; with `None` the
handler receives the raw params object. Raise `AcpError` to answer with an error.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from acp_server import wire
from acp_server.errors import INTERNAL_ERROR, AcpError

if TYPE_CHECKING:
    from jsonrpcserver import Result

log = logging.getLogger(__name__)

# Answered without jsonrpcserver (transport.py): the startup path. Importing jsonrpcserver costs
# ~0.1-0.25 s (it imports jsonschema), so it is loaded in the background after `initialize`.
DIRECT_METHODS = frozenset({"initialize", "session/new"})


class Peer(Protocol):
    """The client end of the connection a request came in on (`transport.Connection` is one).

    A Protocol so that the method table does not import the transport that imports it.
    """

    async def notify(self, method: str, params: object) -> None:
        """Send the client a notification."""
        ...

    async def request(self, method: str, params: object, *, timeout: float | None = None) -> object:
        """Send the client a request and wait for its answer."""
        ...


@dataclass
class RequestContext:
    """What a handler knows about the message it is answering."""

    connection: Peer
    method: str
    request_id: object  # None for notifications (see `is_notification`)
    is_notification: bool
    # Free slots for handlers (e.g. the session a prompt runs in, for its `$/cancel_request` hook).
    extras: dict[str, object] = field(default_factory=dict)
    # Run by the transport right after the success response is written (commands are advertised
    # only after the session/new response, never before).
    after_response: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


# The validated `acp.schema` model (or the raw params object without `params_model`) comes in.
# `Any` on purpose: each handler names its own model (`PromptRequest`, ...), and a Callable's
# parameter is contravariant, so no narrower common type would accept them all.
Handler = Callable[[RequestContext, Any], Awaitable[object]]
CancelHook = Callable[[RequestContext], Awaitable[None]]


@dataclass(frozen=True)
class MethodSpec:
    name: str
    handler: Handler
    params_model: str | None = None
    # How `$/cancel_request` stops this request. None: cancel the handler's task and answer -32800.
    # A hook instead asks the work to stop and lets the handler answer normally (session/prompt).
    on_cancel_request: CancelHook | None = None


class MethodRegistry:
    def __init__(self) -> None:
        self._specs: dict[str, MethodSpec] = {}

    def add(self, spec: MethodSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"method {spec.name!r} registered twice")
        self._specs[spec.name] = spec

    def request(
        self, name: str, *, params_model: str | None = None, on_cancel_request: CancelHook | None = None
    ) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            self.add(MethodSpec(name, handler, params_model, on_cancel_request))
            return handler

        return decorate

    # Notifications and requests share one table: JSON-RPC tells them apart by the id, not the name.
    notification = request

    def get(self, name: str) -> MethodSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def jsonrpc_methods(self) -> dict[str, Callable[..., Awaitable[Result]]]:
        """The table in the shape `jsonrpcserver.async_dispatch` expects (context first, params as kwargs)."""
        return {name: _wrap(spec) for name, spec in self._specs.items()}


@dataclass(frozen=True)
class Outcome:
    """A handler's answer: `result` on success, else `error` = (code, message, data or None)."""

    result: object = None
    error: tuple[int, str, object] | None = None


async def invoke(spec: MethodSpec, ctx: RequestContext, params: dict[str, Any]) -> Outcome:
    """Validate `params` (when the spec names a model), run the handler, map its errors."""
    try:
        arg: Any = params
        if spec.params_model is not None:
            arg = await wire.validate(spec.params_model, params, spec.name)
        result = await spec.handler(ctx, arg)
    except AcpError as exc:
        return Outcome(error=(exc.code, exc.message, exc.data))
    except Exception as exc:
        log.exception("handler for %s failed", spec.name)
        return Outcome(
            error=(INTERNAL_ERROR, f"Internal error in {spec.name}: {type(exc).__name__}: {exc}", None)
        )
    return Outcome(result={} if result is None else result)


def _wrap(spec: MethodSpec) -> Callable[..., Awaitable[Result]]:
    # Positional-only context so a params key can never collide with it; **params accepts any
    # object so shape errors are reported by our validation (-32602 with details), not by binding.
    async def call(ctx: RequestContext, /, **params: Any) -> Result:
        from jsonrpcserver import Error, Success

        outcome = await invoke(spec, ctx, params)
        if outcome.error is not None:
            code, message, data = outcome.error
            return Error(code, message, data) if data is not None else Error(code, message)
        return Success(outcome.result)

    call.__name__ = f"acp_{spec.name}"
    return call
