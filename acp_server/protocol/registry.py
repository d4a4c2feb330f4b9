"""The method table: one line per JSON-RPC method, wrapped for `jsonrpcserver` dispatch.

Adding a method is one decorator, and the handler receives its params typed:

    @registry.request("session/load", params_model="LoadSessionRequest")
    async def load(ctx: RequestContext, req: LoadSessionRequest) -> JsonObject: ...

`params_model` names an `acp.schema` model (or picks one from the params, for a union on the
wire): params are validated with it (failures answer -32602 with the pydantic errors in `data`)
and the handler receives the model instance. `reader` instead reads the params with our own typed
function (the startup methods, which must not wait for `acp.schema`; the `_harness/*` extension
methods, which have no schema model). With neither the handler receives the raw params object.
Raise `AcpError` to answer with an error.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, overload

from acp_server.protocol import wire
from acp_server.protocol.errors import INTERNAL_ERROR, AcpError

if TYPE_CHECKING:
    from jsonrpcserver import Result

log = logging.getLogger(__name__)

# Answered without jsonrpcserver (transport.py): the startup path (`authenticate` comes right after
# `initialize` from clients that sign in first). Importing jsonrpcserver costs
# ~0.1-0.25 s (it imports jsonschema), so it is loaded in the background after `initialize`.
DIRECT_METHODS = frozenset({"initialize", "authenticate", "session/new"})


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


JsonObject = dict[str, object]
P = TypeVar("P")

# A handler gets the request's context and its params as the handler's own type: the `acp.schema`
# model named by `params_model`, what a `reader` returns, or the raw params object.
Handler = Callable[[RequestContext, P], Awaitable[object]]
# Reads (validates) a request's params object for the method named; raises `AcpError` (-32602).
ParamsReader = Callable[[JsonObject, str], Awaitable[P]]
# An `acp.schema` model name, or a function naming the model these params are (a wire union).
ModelName = str | Callable[[JsonObject], str]
CancelHook = Callable[[RequestContext], Awaitable[None]]


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: its name, the call that reads params and runs it, the handler."""

    name: str
    # Reads the params into the handler's type and runs the handler (built by `request`).
    call: Callable[[RequestContext, JsonObject], Awaitable[object]]
    # The handler as registered, for introspection (the test that ties models to annotations).
    handler: Callable[..., Awaitable[object]]
    params_model: ModelName | None = None
    # How `$/cancel_request` stops this request. None: cancel the handler's task and answer -32800.
    # A hook instead asks the work to stop and lets the handler answer normally (session/prompt).
    on_cancel_request: CancelHook | None = None


def _schema_reader(params_model: ModelName) -> ParamsReader[object]:
    async def read(params: JsonObject, method: str) -> object:
        name = params_model if isinstance(params_model, str) else params_model(params)
        return await wire.validate(name, params, method)

    return read


async def _raw(params: JsonObject, method: str) -> JsonObject:
    return params


class MethodRegistry:
    def __init__(self) -> None:
        self._specs: dict[str, MethodSpec] = {}

    def add(self, spec: MethodSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"method {spec.name!r} registered twice")
        self._specs[spec.name] = spec

    @overload
    def request(
        self, name: str, *, reader: ParamsReader[P], on_cancel_request: CancelHook | None = None
    ) -> Callable[[Handler[P]], Handler[P]]: ...

    @overload
    def request(
        self, name: str, *, params_model: ModelName, on_cancel_request: CancelHook | None = None
    ) -> Callable[[Handler[P]], Handler[P]]: ...

    @overload
    def request(
        self, name: str, *, on_cancel_request: CancelHook | None = None
    ) -> Callable[[Handler[JsonObject]], Handler[JsonObject]]: ...

    def request(
        self,
        name: str,
        *,
        params_model: ModelName | None = None,
        reader: ParamsReader[Any] | None = None,
        on_cancel_request: CancelHook | None = None,
    ) -> Callable[[Handler[Any]], Handler[Any]]:
        """Register the decorated handler for `name` (see the module docstring for its params)."""
        if params_model is not None and reader is not None:
            raise ValueError(f"method {name!r}: give params_model or reader, not both")
        read: ParamsReader[object] = (
            reader
            if reader is not None
            else _schema_reader(params_model)
            if params_model is not None
            else _raw
        )

        def decorate(handler: Handler[P]) -> Handler[P]:
            async def call(ctx: RequestContext, params: JsonObject) -> object:
                # The model `params_model` names (or `reader` returns) is the one the handler
                # annotates: the one place the two are tied (tests/acp_server/test_method_params.py).
                # The raw object too: a field the SDK's model does not know yet (an unstable one,
                # `systemPrompt`) is read from it.
                ctx.extras["params"] = params
                return await handler(ctx, cast(P, await read(params, name)))

            self.add(MethodSpec(name, call, handler, params_model, on_cancel_request))
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


async def invoke(spec: MethodSpec, ctx: RequestContext, params: JsonObject) -> Outcome:
    """Read the params into the handler's type, run the handler, map its errors."""
    try:
        result = await spec.call(ctx, params)
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
    async def call(ctx: RequestContext, /, **params: object) -> Result:
        from jsonrpcserver import Error, Success

        outcome = await invoke(spec, ctx, params)
        if outcome.error is not None:
            code, message, data = outcome.error
            return Error(code, message, data) if data is not None else Error(code, message)
        return Success(outcome.result)

    call.__name__ = f"acp_{spec.name}"
    return call
