"""The thread transport: a `ClientCore` over a child's pipes with a reader thread and blocking
calls (the test suite's client uses it; code without an event loop can too).

Unlike the asyncio transport, a line that is not one JSON-RPC object does not stop the reader: it
is handed to `on_incoming` as a `BadLine` and reading goes on (a test wants to see every such
line, and what came after it). Each agent request is answered on its own thread, so a policy
that blocks or holds a request open never stops the reading.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import IO, Any

from acp_driver.core import AgentRequest, ClientCore, Incoming, Response, id_key
from acp_driver.framing import BadLine

READ_CHUNK = 1 << 16


class RpcError(Exception):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


class StreamClosed(Exception):
    """The agent's output ended before the answer came."""


class ThreadClient:
    def __init__(
        self,
        stdin: IO[bytes],
        stdout: IO[bytes],
        core: ClientCore | None = None,
        *,
        on_incoming: Callable[[Incoming], None] | None = None,
    ) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self.core = core or ClientCore()
        # Called on the reader thread for every line, in order, before a request is answered.
        self.on_incoming = on_incoming
        # Guards the core and the responses; waiters sleep on it. Re-entrant, so a caller may hold
        # it around its own state (frames) and still call in here.
        self.cond = threading.Condition(threading.RLock())
        self.ended = False  # the agent's output reached its end
        self._responses: dict[str, dict[str, Any]] = {}
        self._write_lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, name="acp-client-reader", daemon=True)

    def start(self) -> None:
        self.reader.start()

    # ------------------------------------------------------------ reading

    def _read(self) -> None:
        fd = self.stdout.fileno()
        try:
            while chunk := os.read(fd, READ_CHUNK):
                for line in self.core.decoder.feed(chunk):
                    self._receive(line)
        except OSError:
            pass  # the pipe was closed under us: the same as its end
        for line in self.core.decoder.end():
            self._receive(line)
        with self.cond:
            self.ended = True
            self.cond.notify_all()

    def _receive(self, line: bytes | BadLine) -> None:
        with self.cond:
            item = self.core.receive(line)
        if self.on_incoming is not None:
            self.on_incoming(item)
        with self.cond:
            if isinstance(item, Response):
                self._responses.setdefault(id_key(item.request_id), item.message)
            self.cond.notify_all()
        if isinstance(item, AgentRequest):
            threading.Thread(target=self._answer, args=(item,), daemon=True).start()

    def _answer(self, request: AgentRequest) -> None:
        reply = self.core.reply(request)
        if reply is not None:
            self.send(reply)

    # ------------------------------------------------------------ writing

    def send_raw(self, data: bytes) -> None:
        with self._write_lock:
            self.stdin.write(data)
            self.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        with self.cond:
            line = self.core.outgoing(message)
        self.send_raw(line)

    def start_request(self, method: str, params: Any = None, *, request_id: Any = None) -> Any:
        with self.cond:
            request_id, line = self.core.request(method, params, request_id=request_id)
        self.send_raw(line)
        return request_id

    def notify(self, method: str, params: Any = None) -> None:
        with self.cond:
            line = self.core.notification(method, params)
        self.send_raw(line)

    # ------------------------------------------------------------ waiting

    def response(self, request_id: Any, timeout: float | None = 60.0) -> dict[str, Any]:
        """The response message to `request_id`: `TimeoutError`, or `StreamClosed` when the output
        ended without it."""
        key = id_key(request_id)
        with self.cond:
            if not self.cond.wait_for(lambda: key in self._responses or self.ended, timeout):
                raise TimeoutError(f"no response to request {request_id!r} within {timeout} s")
            if key not in self._responses:
                raise StreamClosed(f"the agent's output ended before it answered {request_id!r}")
            return self._responses[key]

    def request(self, method: str, params: Any = None, *, timeout: float | None = 60.0) -> Any:
        """The result of one request, or `RpcError`."""
        message = self.response(self.start_request(method, params), timeout)
        if "error" in message:
            raise RpcError(message["error"])
        return message.get("result")

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        with self.cond:
            if session_id is None:
                return [p.get("update", {}) for p in self.core.updates]
            return self.core.session_updates(session_id)
