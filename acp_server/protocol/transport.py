"""Newline-delimited JSON-RPC 2.0 over a byte stream pair, both directions at once.

* The reader never waits on a handler: each inbound request/notification runs in its own task, so a
  `session/cancel` is read while a `session/prompt` is still running.
* Responses to our own agent->client requests resolve waiting futures (with timeouts).
* Writes are serialized under one lock, one complete line at a time.
* Bad input is answered and forgotten: invalid JSON (-32700), non-objects and batches (-32600),
  broken envelopes (-32600), over-long lines (-32600, the line is skipped without buffering it all),
  unknown methods (-32601, via jsonrpcserver), unknown notifications (ignored).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from acp_server.protocol import frames, wire
from acp_server.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    AcpError,
    PeerError,
)
from acp_server.protocol.line_head import HEAD_BYTES, read_head
from acp_server.protocol.pipes import ByteReader, ByteWriter
from acp_server.protocol.registry import DIRECT_METHODS, MethodRegistry, RequestContext, invoke

log = logging.getLogger(__name__)

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
CANCEL_REQUEST = "$/cancel_request"
# After EOF, how long in-flight handlers get to write their answers before they are cancelled.
DRAIN_TIMEOUT_SECONDS = 10.0


class ConnectionClosed(Exception):
    """The peer went away before answering our request."""


@dataclass(frozen=True)
class _Oversized:
    """A request line past the size limit (its length), answered with an error."""

    size: int
    head: bytes = b""  # its first bytes (line_head.HEAD_BYTES): where its id may still be read


@dataclass
class _Waiter:
    """A request this server sent the client, waiting for its answer."""

    method: str
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: Any = None
    closed: bool = False


@dataclass
class _Inflight:
    """A client request being handled: its context and the scope that cancels it."""

    ctx: RequestContext
    scope: anyio.CancelScope
    cancelled_by_peer: bool = False


def _id_key(value: Any) -> str:
    # Ids are echoed exactly, and 1 and "1" are different requests; the JSON text keys them apart.
    return json.dumps(value, sort_keys=True)


def _usable_id(ident: Any) -> bool:
    if isinstance(ident, bool):
        return False
    if isinstance(ident, float):
        return math.isfinite(ident)  # NaN/Infinity cannot be echoed as JSON
    return ident is None or isinstance(ident, str | int)


def _envelope_problem(message: dict[str, Any]) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return 'the "jsonrpc" member must be exactly "2.0"'
    if not isinstance(message.get("method"), str):
        return 'the "method" member must be a string'
    if "id" in message:
        if not _usable_id(message["id"]):
            return 'the "id" member must be a string, a finite number or null'
    if "params" in message and not isinstance(message["params"], dict | list):
        return 'the "params" member must be an object or an array'
    return None


def _renamed_error(payload: dict[str, Any], served: str, asked: str) -> dict[str, Any]:
    error = payload.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return payload
    return {**payload, "error": {**error, "message": error["message"].replace(served, asked)}}


def _encode(message: Mapping[str, object]) -> bytes | None:
    """One UTF-8 JSON line, or an internal-error answer in its place when the message cannot be
    serialized (NaN, a non-JSON type); None for an unserializable notification (logged, dropped)."""
    try:
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return (line + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (echoed from a client's own escapes) are not UTF-8: fall back to \u escapes.
        return (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")
    except (TypeError, ValueError) as exc:
        log.error("cannot serialize outgoing message (%s)", exc)
        if "method" in message or "id" not in message:
            return None
        ident = message["id"] if _usable_id(message["id"]) else None
        error = frames.rpc_error(INTERNAL_ERROR, f"result not serializable: {exc}")
        return (json.dumps(frames.error_message(ident, error)) + "\n").encode("ascii")


class Dialect(Protocol):
    """Another protocol version's shape of what this connection writes (acp_server/v2); the handlers
    keep producing v1 frames. Each hook returns the (method, params) notifications to write."""

    def inbound(self, message: dict[str, Any]) -> dict[str, Any]: ...  # may raise AcpError: answered

    def notification(self, method: str, params: Any) -> list[tuple[str, Any]]: ...

    def request(self, method: str, params: Any) -> tuple[list[tuple[str, Any]], Any]: ...

    def answered(self, method: str, params: Any) -> list[tuple[str, Any]]: ...

    def result(self, method: str, params: Any, result: Any) -> tuple[list[tuple[str, Any]], Any]: ...


class Connection:
    """One JSON-RPC peer connection; `serve()` runs it until end of input."""

    def __init__(
        self,
        reader: ByteReader,
        writer: ByteWriter,
        registry: MethodRegistry,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._registry = registry
        self._methods = registry.jsonrpc_methods()
        self._max_line_bytes = max_line_bytes
        self._write_lock = anyio.Lock()
        self._ids = itertools.count(1)
        self._waiters: dict[str, _Waiter] = {}
        self._inflight: dict[str, _Inflight] = {}
        self._task_group: TaskGroup | None = None
        self._broken = False
        self._active = 0
        self._idle = anyio.Event()
        self._idle.set()
        self.eof = anyio.Event()
        self.dialect: Dialect | None = None  # set by `initialize` when the client speaks ACP v2

    # ------------------------------------------------------------------ outbound

    async def send(self, message: Mapping[str, object]) -> None:
        """Write one message as one line. A vanished peer is logged once, never raised."""
        data = _encode(message)
        if data is None:
            return
        async with self._write_lock:
            if self._broken:
                return
            try:
                await self._writer.send(data)
            except (BrokenPipeError, ConnectionResetError, OSError, anyio.ClosedResourceError) as exc:
                self._broken = True
                log.warning("client stopped reading our output (%s); dropping further messages", exc)

    async def notify(self, method: str, params: object) -> None:
        """Send the client a notification (in the connection's dialect, when it has one)."""
        if self.dialect is None:
            await self.send(frames.notification_message(method, params))
            return
        await self._notify_all(self.dialect.notification(method, params))

    async def notify_as_is(self, method: str, params: object) -> None:
        """A notification already in the connection's protocol (a dialect's own)."""
        await self.send(frames.notification_message(method, params))

    async def _notify_all(self, messages: list[tuple[str, Any]]) -> None:
        for method, params in messages:
            await self.send(frames.notification_message(method, params))

    async def request(
        self, method: str, params: object, *, timeout: float | None = None, cancel_if_abandoned: bool = False
    ) -> object:
        """Send an agent->client request and wait for its answer.

        Raises `PeerError` for an error answer, `TimeoutError` after `timeout` seconds and
        `ConnectionClosed` if input ends first. `cancel_if_abandoned`: when the wait is cancelled
        before the answer came, the client is sent `$/cancel_request` for it (so it stops asking the
        user about work that is gone).
        """
        ident = next(self._ids)
        key = _id_key(ident)
        waiter = _Waiter(method)
        self._waiters[key] = waiter
        sent = False
        dialect, original = self.dialect, params
        try:
            if self.eof.is_set():
                raise ConnectionClosed(f"client disconnected; {method} was not sent")
            if dialect is not None:
                before, params = dialect.request(method, params)
                await self._notify_all(before)
            await self.send(frames.request_message(ident, method, params))
            sent = True
            with anyio.fail_after(timeout):
                await waiter.done.wait()
        finally:
            self._waiters.pop(key, None)
            if dialect is not None and sent:
                with anyio.CancelScope(shield=True):  # the state change is owed even to a cancelled wait
                    await self._notify_all(dialect.answered(method, original))
            if cancel_if_abandoned and sent and not waiter.done.is_set() and self._task_group is not None:
                # Sent from the connection's task group: the waiting task is being cancelled.
                self._task_group.start_soon(
                    self.notify, CANCEL_REQUEST, frames.cancel_request_notification(ident)
                )
        if waiter.closed:
            raise ConnectionClosed(f"client disconnected before answering {method}")
        if waiter.error is not None:
            raise PeerError(method, waiter.error)
        return waiter.result

    # ------------------------------------------------------------------ inbound

    async def serve(
        self,
        on_eof: Callable[[], Awaitable[None]] | None = None,
        *,
        drain_timeout: float = DRAIN_TIMEOUT_SECONDS,
    ) -> None:
        """Read and dispatch until end of input; then run `on_eof` (which should stop long work),
        let in-flight handlers answer (up to `drain_timeout`), and cancel whatever is left."""
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            try:
                async for line in self._lines():
                    self._accept(line)
            finally:
                self.eof.set()
                for waiter in list(self._waiters.values()):
                    waiter.closed = True
                    waiter.done.set()
            if on_eof is not None:
                await on_eof()
            with anyio.move_on_after(drain_timeout):
                await self._idle.wait()
            tg.cancel_scope.cancel()

    def _spawn(self, func: Callable[..., Awaitable[None]], *args: Any) -> None:
        assert self._task_group is not None
        if self._active == 0:
            self._idle = anyio.Event()
        self._active += 1
        self._task_group.start_soon(self._tracked, func, *args)

    async def _tracked(self, func: Callable[..., Awaitable[None]], *args: Any) -> None:
        try:
            await func(*args)
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    async def _lines(self) -> AsyncIterator[bytes | _Oversized]:
        """Split input on b"\\n"; a line over the limit becomes `_Oversized` without being kept in memory."""
        buf = bytearray()
        skipping = False
        skipped = 0
        head = b""
        limit = self._max_line_bytes
        while True:
            chunk = await self._reader.receive()
            if not chunk:
                break
            start = 0
            while True:
                newline = chunk.find(b"\n", start)
                if newline < 0:
                    rest = len(chunk) - start
                    if skipping:
                        skipped += rest
                    elif len(buf) + rest > limit:
                        skipping, skipped = True, len(buf) + rest
                        head = bytes((buf + chunk[start:])[:HEAD_BYTES])
                        buf.clear()
                    else:
                        buf += chunk[start:]
                    break
                piece = newline - start
                if skipping:
                    yield _Oversized(skipped + piece, head)
                    skipping, head = False, b""
                elif len(buf) + piece > limit:
                    yield _Oversized(len(buf) + piece, bytes((buf + chunk[start:newline])[:HEAD_BYTES]))
                    buf.clear()
                elif buf:
                    buf += chunk[start:newline]
                    yield bytes(buf)
                    buf.clear()
                else:
                    yield chunk[start:newline]
                start = newline + 1
        if skipping:
            yield _Oversized(skipped, head)
        elif buf.strip():
            yield bytes(buf)

    def _accept(self, line: bytes | _Oversized) -> None:
        if isinstance(line, _Oversized):
            self._refuse_oversized(line)
            return
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:
            self._reply_soon(None, PARSE_ERROR, f"Parse error: {exc}"[:500])
            return
        if isinstance(message, list):
            self._reply_soon(None, INVALID_REQUEST, "Invalid request: batches are not supported by ACP")
            return
        if not isinstance(message, dict):
            self._reply_soon(None, INVALID_REQUEST, "Invalid request: a message must be a JSON object")
            return
        if "method" not in message and ("result" in message or "error" in message):
            self._resolve(message)
            return
        self._spawn(self._handle, message)

    def _refuse_oversized(self, line: _Oversized) -> None:
        """Answer an oversized request with its own id where its head shows it (its sender would
        otherwise wait forever); an oversized response fails the request of ours it answers."""
        text = (
            f"message of {line.size} bytes exceeds the {self._max_line_bytes}-byte limit "
            f"(CONTINUAL_ACP_MAX_MESSAGE_BYTES); it was skipped"
        )
        found = read_head(line.head)
        if found.is_response and found.ident is not None:
            self._resolve({"id": found.ident, "error": {"code": INVALID_REQUEST, "message": text}})
            return
        ident = found.ident if "method" in found.keys and found.ident is not None else None
        self._reply_soon(ident, INVALID_REQUEST, text)

    def _reply_soon(self, ident: Any, code: int, message: str) -> None:
        self._spawn(self._reply_error, ident, code, message)

    async def _reply_error(self, ident: Any, code: int, message: str, data: Any = None) -> None:
        await self.send(frames.error_message(ident, frames.rpc_error(code, message, data)))

    def _resolve(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        # Tolerate a peer that echoes our integer id as a string.
        if isinstance(ident, str) and ident.isdigit():
            ident = int(ident)
        waiter = self._waiters.get(_id_key(ident))
        if waiter is None:
            log.warning("ignoring a response to unknown request id %r", message.get("id"))
            return
        if "error" in message:
            waiter.error = message["error"] if message["error"] is not None else {"message": "null error"}
        else:
            waiter.result = message.get("result")
        waiter.done.set()

    async def _handle(self, message: dict[str, Any]) -> None:
        problem = _envelope_problem(message)
        is_notification = "id" not in message
        ident = message.get("id")
        if problem is not None:
            if not is_notification or not isinstance(message.get("method"), str):
                valid_id = ident if ident is not None and _usable_id(ident) else None
                await self._reply_error(valid_id, INVALID_REQUEST, f"Invalid request: {problem}")
            return
        asked = message["method"]
        if self.dialect is not None:
            try:  # a request the v1 table serves under another name, or one the dialect refuses
                message = self.dialect.inbound(message)
            except AcpError as exc:
                if not is_notification:
                    await self._reply_error(ident, exc.code, exc.message, exc.data)
                return
        method: str = message["method"]
        if method == CANCEL_REQUEST:
            await self._cancel_request(message.get("params"))
            if not is_notification:
                await self.send(frames.result_message(ident, None))
            return
        ctx = RequestContext(self, method, ident, is_notification)
        scope = anyio.CancelScope()
        key = _id_key(ident)
        inflight = _Inflight(ctx, scope)
        if not is_notification:
            if key in self._inflight:
                await self._reply_error(
                    ident, INVALID_REQUEST, f"Invalid request: id {ident!r} is already in use"
                )
                return
            self._inflight[key] = inflight
        payload: Any = None
        try:
            with scope:
                payload = await self._dispatch(message, ctx)
        finally:
            if not is_notification:
                self._inflight.pop(key, None)
        if is_notification:
            return
        if inflight.cancelled_by_peer and scope.cancelled_caught:
            await self._reply_error(ident, REQUEST_CANCELLED, f"{method} was cancelled by $/cancel_request")
            return
        if payload is not None:
            if not isinstance(payload, dict):  # only batches serialize to lists, and we refuse those
                return
            if self.dialect is not None and "result" in payload:
                before, result = self.dialect.result(method, message.get("params"), payload["result"])
                await self._notify_all(before)
                payload = {**payload, "result": result}
            elif asked != method:  # the handler's refusal names the method it served: say the asked one
                payload = _renamed_error(payload, method, asked)
            await self.send(payload)
            if "result" in payload:
                for callback in ctx.after_response:
                    try:
                        await callback()
                    except Exception:
                        log.exception("after-response step of %s failed", method)

    async def _dispatch(self, message: dict[str, Any], ctx: RequestContext) -> Any:
        """The answer to one request (None for a notification): the startup methods directly, the
        rest through jsonrpcserver (imported in the background after `initialize`, see wire.py)."""
        params = message.get("params", {})
        spec = self._registry.get(ctx.method)
        if spec is not None and ctx.method in DIRECT_METHODS and isinstance(params, dict):
            outcome = await invoke(spec, ctx, params)
            if ctx.is_notification:
                return None
            if outcome.error is not None:
                return frames.error_message(ctx.request_id, frames.rpc_error(*outcome.error))
            return frames.result_message(ctx.request_id, outcome.result)
        await wire.dispatcher()  # imported in the background: wait for it off the loop
        from jsonrpcserver.async_main import dispatch_to_response
        from jsonrpcserver.response import to_serializable

        response: Any = await dispatch_to_response(
            "",
            self._methods,
            context=ctx,
            deserializer=lambda _unused: message,
            validator=lambda deserialized: deserialized,
        )
        return None if response is None else to_serializable(response)

    async def _cancel_request(self, params: Any) -> None:
        if not isinstance(params, dict) or "requestId" not in params:
            log.warning("ignoring $/cancel_request without a requestId: %r", params)
            return
        inflight = self._inflight.get(_id_key(params["requestId"]))
        if inflight is None:
            return  # already answered, or never seen: nothing to cancel
        spec = self._registry.get(inflight.ctx.method)
        if spec is not None and spec.on_cancel_request is not None:
            await spec.on_cancel_request(inflight.ctx)
            return
        inflight.cancelled_by_peer = True
        inflight.scope.cancel()
