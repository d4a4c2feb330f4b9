"""One MCP server: a supervisor task that owns the SDK session, and a request queue to reach it.

The SDK is anyio-based: its transports and `ClientSession` are context managers whose task groups
must be entered and left by the same task. So each server runs in its own long-lived task that holds
those contexts; callers from any task put requests on a queue and await a future. A crash of one
server ends only its own task (the others are separate tasks), and every caller waiting on it gets
an error instead of hanging. State, last error and the tool list are kept here for `/mcp` and the
prompt; `restart()` stops the task (the SDK then stops the process) and starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from agent_core.mcp.config import ServerConfig
from agent_core.mcp.records import McpNotice, McpOpError, State

if TYPE_CHECKING:
    from mcp import ClientSession

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0  # seconds from spawn to a tool list
AUTO_RESTARTS = 3  # a server that crashed after being ready is restarted by the next call, this often
STDERR_TAIL = 800

Op = Callable[["ClientSession"], Awaitable[Any]]
_E = TypeVar("_E", bound=BaseException)


class _ServerGone(Exception):
    pass


@dataclass(eq=False)
class _Request:
    """One operation waiting for a server's connection task to run it."""

    label: str
    op: Op
    timeout: float
    future: asyncio.Future[Any]
    scope: anyio.CancelScope | None = field(default=None)


class ServerConnection:
    def __init__(
        self,
        config: ServerConfig,
        *,
        cwd: str | None,
        on_notice: Callable[[McpNotice], None],
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.config = config
        self.cwd = cwd
        self.state: State = "connecting"  # configured; the task starts with `start()` or the first use
        self.error: str | None = None
        self.tools: list[dict[str, Any]] = []  # wire `Tool` objects
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.restarts = 0
        self._on_notice = on_notice
        self._connect_timeout = connect_timeout
        self._requests: asyncio.Queue[_Request] = asyncio.Queue()
        self._inflight: set[_Request] = set()
        self._settled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._was_ready = False
        self._auto_restarts = 0
        self._gone: anyio.Event | None = None  # set when the current connection's transport ended
        self._garbage: str | None = None  # the last line the transport could not parse
        self._tools_stale = False  # the server said its tool list changed

    @property
    def name(self) -> str:
        return self.config.name

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Connect in the background (returns at once)."""
        if self._task is not None and not self._task.done():
            return
        self.state, self.error, self.tools = "connecting", None, []
        self._settled.clear()
        self._was_ready = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp-{self.name}")

    async def stop(self) -> None:
        """Stop the connection (the SDK closes stdin, then kills the server's process group)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=10)
        self.state = "stopped"
        self._fail_pending(McpOpError("unavailable", f"MCP server {self.name!r} was stopped"))
        self._settled.set()

    async def restart(self) -> None:
        await self.stop()
        self.restarts += 1
        self.start()

    async def _run(self) -> None:
        import tempfile  # here, not at import: it is ~4 ms of a new session's start (random, shutil)

        errlog: Any = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        try:
            # The SDK import is heavy (httpx, pydantic models): off the event loop.
            transports = await asyncio.to_thread(importlib.import_module, "agent_core.mcp.transports")
            async with transports.open_transport(self.config, errlog, self.cwd) as (read, write):
                await self._session(transports, read, write)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            message = self._describe_failure(exc, errlog)
            was_ready = self._was_ready
            self.state, self.error = "failed", message
            self._fail_pending(McpOpError("unavailable", f"MCP server {self.name!r} {message}"))
            what = "stopped working" if was_ready else "could not start"
            log.warning("MCP server %s %s: %s", self.name, what, message)
            self._on_notice(McpNotice(self.name, "error", f"MCP server {self.name!r} {what}: {message}"))
        finally:
            self._settled.set()
            errlog.close()

    async def _session(self, transports: Any, read: Any, write: Any) -> None:
        gone = self._gone = anyio.Event()
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def pump() -> None:
            # Between the transport and the session, so an idle server's exit is noticed at once.
            try:
                async with send:
                    async for item in read:
                        await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                gone.set()

        async def watch() -> None:
            await gone.wait()
            raise _ServerGone("closed the connection (the server exited or hung up)")

        async with anyio.create_task_group() as outer:
            outer.start_soon(pump)
            client = transports.client_session(receive, write, self._garbage_seen, self._notified)
            async with client as opened:
                with anyio.fail_after(self._connect_timeout):
                    init = await opened.initialize()
                    self.tools = await _list_tools(opened, transports)
                self.server_info = transports.dump(init).get("serverInfo", {})
                self.capabilities = transports.dump(init).get("capabilities", {})
                self.state, self.error, self._was_ready = "ready", None, True
                self._settled.set()
                async with anyio.create_task_group() as group:
                    group.start_soon(watch)
                    while True:
                        request = await self._requests.get()
                        if not request.future.done():
                            self._inflight.add(request)  # before the task starts: a crash must answer it
                            group.start_soon(self._serve, transports, opened, request)
            outer.cancel_scope.cancel()

    async def _serve(self, transports: Any, client: ClientSession, request: _Request) -> None:
        future = request.future
        try:
            with anyio.CancelScope() as scope:
                # The caller gave up (its cell was interrupted): stop waiting for the server too.
                future.add_done_callback(lambda f: scope.cancel() if f.cancelled() else None)
                with anyio.fail_after(request.timeout):
                    result = await request.op(client)
                if not future.done():
                    future.set_result(result)
        except TimeoutError:
            message = f"MCP server {self.name!r} did not answer {request.label} within {request.timeout:g} s"
            self._on_notice(McpNotice(self.name, "warning", message))
            if self._garbage is not None:
                message += f"; it sent output that is not JSON-RPC ({self._garbage})"
            limit = " (mcp_call_timeout in config.toml sets the limit)"
            _fail(future, McpOpError("timeout", message + limit))
        except McpOpError as exc:
            _fail(future, exc)
        except Exception as exc:
            if self._gone is not None and self._gone.is_set():
                # The server went away under the call; the next call starts it again.
                self.state, self.error = "failed", f"exited during {request.label}"
                message = f"MCP server {self.name!r} exited during {request.label}; the next call restarts it"
                _fail(future, McpOpError("unavailable", message))
            else:
                _fail(future, McpOpError("tool_error", f"{self.name}: {transports.error_message(exc)}"))
        finally:
            if future.done():  # else it was cancelled with the task: `_fail_pending` answers it
                self._inflight.discard(request)

    def _notified(self, method: str) -> None:
        if method == "notifications/tools/list_changed":
            self._tools_stale = True

    async def fresh_tools(self) -> list[dict[str, Any]]:
        """The tool list, listed again first if the server said it changed."""
        if self._tools_stale:
            self._tools_stale = False

            async def op(client: ClientSession) -> Any:
                from agent_core.mcp import transports

                return await _list_tools(client, transports)

            self.tools = list(await self.request("tools/list", op, self._connect_timeout))
        return self.tools

    def _garbage_seen(self, text: str) -> None:
        first = self._garbage is None
        self._garbage = text[:300]
        if first:
            message = f"MCP server {self.name!r} sent output that is not JSON-RPC: {self._garbage}"
            self._on_notice(McpNotice(self.name, "warning", message))

    def _fail_pending(self, error: McpOpError) -> None:
        for request in list(self._inflight):
            _fail(request.future, error)
        self._inflight.clear()
        while not self._requests.empty():
            _fail(self._requests.get_nowait().future, error)

    def _describe_failure(self, exc: BaseException, errlog: Any) -> str:
        try:
            from agent_core.mcp.transports import error_message
        except ImportError:  # the SDK itself is missing or broken: say that, not a traceback
            return f"the MCP SDK could not be imported ({exc}); install continual-acp's `mcp` dependency"
        gone = _first(exc, _ServerGone)
        if gone is not None:
            return str(gone)
        if _first(exc, TimeoutError) is not None:
            text = f"did not finish its MCP handshake within {self._connect_timeout:g} s"
        else:
            text = error_message(exc)
        if self._was_ready:
            return text  # the stderr of a server that worked is its own log, not the reason
        with contextlib.suppress(OSError, ValueError):
            errlog.flush()
            errlog.seek(0)
            tail = errlog.read()[-STDERR_TAIL:].strip()
            if tail:
                text += f" (stderr: {' | '.join(tail.splitlines()[-5:])})"
        return text

    # ------------------------------------------------------------ requests

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait for a connecting server (default bound: the connect timeout, plus the spawn);
        raise `McpOpError("unavailable")` if it is not usable."""
        timeout = self._connect_timeout + 10 if timeout is None else timeout
        if self._task is None and self.state == "connecting":
            self.start()  # never started (the owner defers starts until its reply is out): now
        if self.state == "failed" and self._was_ready and self._auto_restarts < AUTO_RESTARTS:
            self._auto_restarts += 1
            self.restarts += 1
            task = self._task
            if task is not None and not task.done():
                await asyncio.wait({task}, timeout=10)  # the old connection is still being torn down
            self.start()  # it crashed after working: one more try, now
        if self.state == "connecting":
            try:
                await asyncio.wait_for(self._settled.wait(), timeout)
            except TimeoutError:
                raise McpOpError(
                    "unavailable", f"MCP server {self.name!r} is still connecting after {timeout:g} s"
                ) from None
        if self.state != "ready":
            why = f": {self.error}" if self.error else ""
            raise McpOpError(
                "unavailable",
                f"MCP server {self.name!r} is {self.state}{why}. `/mcp restart {self.name}` tries again.",
            )

    async def request(self, label: str, op: Op, timeout: float) -> Any:
        """Run `op(client)` (the SDK ClientSession) in the server's task; its result, or `McpOpError`."""
        await self.wait_ready()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._requests.put_nowait(_Request(label, op, timeout, future))
        try:
            # The server task enforces `timeout`; this bound only covers a wedged task.
            return await asyncio.wait_for(future, timeout + 5)
        except TimeoutError:
            raise McpOpError("timeout", f"MCP server {self.name!r} did not answer {label}") from None

    def tool(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.tools if t.get("name") == name), None)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _first(exc: BaseException, kind: type[_E]) -> _E | None:
    """`exc` (or the first leaf of an exception group) if it is a `kind`."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, kind) else None


async def _list_tools(client: ClientSession, transports: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    result = await client.list_tools()
    while True:
        body = transports.dump(result)
        tools.extend(body.get("tools", []))
        cursor = body.get("nextCursor")
        if not cursor or len(tools) > 10_000:
            return tools
        from mcp import types

        result = await client.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
