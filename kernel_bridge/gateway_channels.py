"""A kernel's Jupyter channels over a gateway's websocket, shaped like jupyter_client's async client.

`KernelSession` talks to a kernel through `execute`, `get_shell_msg`, `get_iopub_msg`,
`get_stdin_msg` and `input`; this class offers the same calls over the one websocket a Jupyter
gateway proxies (`/api/kernels/{id}/channels`, JSON messages carrying a `channel` field), so the
session does not know which transport it has. The token goes on the websocket handshake too
(`Authorization: token ...`), which jupyter_server's `GatewayKernelClient` did not do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import socket
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import aiohttp

from kernel_bridge.gateway_rest import GatewayError, GatewaySettings, ssl_option

log = logging.getLogger(__name__)

_PROTOCOL_VERSION = "5.3"
_CHANNELS = ("shell", "iopub", "stdin", "control")


class ChannelClosed(ConnectionError):
    """The websocket to the gateway closed: the kernel is gone or unreachable."""


_CLOSED = object()
_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux only


class GatewayChannels:
    """shell/iopub/stdin/control queues fed by one websocket reader task."""

    def __init__(self, settings: GatewaySettings, kernel_id: str) -> None:
        self.settings = settings
        self.kernel_id = kernel_id
        self.session_id = uuid.uuid4().hex
        self._queues: dict[str, asyncio.Queue[Any]] = {name: asyncio.Queue() for name in _CHANNELS}
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self.closed_reason: str | None = None
        self.dead_reason: str | None = None  # the gateway said the kernel died or restarted
        self.last_received = time.monotonic()
        self.allow_stdin = False
        self._sock: socket.socket | None = None

    async def connect(self) -> None:
        """Open the websocket (token in the handshake) and start reading it."""
        self._http = aiohttp.ClientSession(headers=self.settings.headers())
        url = self.settings.ws_url(self.kernel_id, self.session_id)
        try:
            # aiohttp pings every 10 s and closes the socket when no pong comes: a vanished gateway
            # or network path then ends the session's cell as a dead kernel instead of hanging it.
            self._ws = await self._http.ws_connect(
                url,
                ssl=ssl_option(self.settings.verify),
                heartbeat=10.0,
                max_msg_size=0,
                timeout=aiohttp.ClientWSTimeout(ws_close=5.0),
            )
        except aiohttp.WSServerHandshakeError as exc:
            await self._http.close()
            if exc.status == 401:
                raise GatewayError(
                    f"the kernel gateway at {self.settings.base} refused the websocket of kernel "
                    f"{self.kernel_id} (HTTP {exc.status}); set CONTINUAL_ACP_GATEWAY_TOKEN "
                    "(config `gateway_token`) to the gateway's auth token"
                ) from exc
            raise GatewayError(
                f"the kernel gateway at {self.settings.base} refused the websocket of kernel "
                f"{self.kernel_id}: HTTP {exc.status} {exc.message}"
            ) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            await self._http.close()
            raise GatewayError(
                f"cannot open the websocket of kernel {self.kernel_id} at {self.settings.base}: {exc}"
            ) from exc
        self._sock = self._ws.get_extra_info("socket")
        self._reader = asyncio.get_running_loop().create_task(self._read(), name="gateway-ws")

    def _quick_ack(self) -> None:
        # Jupyter's websocket handler leaves Nagle on (tornado turns TCP_NODELAY off after the
        # upgrade), so the gateway holds its second small frame until we ACK the first, and
        # Linux delays that ACK by up to 40 ms: every cell paid ~40 ms. Acking at once removes it.
        sock = self._sock
        if sock is not None and _QUICKACK is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)

    async def _read(self) -> None:
        ws = self._ws
        assert ws is not None
        reason = "the gateway closed the kernel's websocket"
        try:
            async for frame in ws:
                self._quick_ack()
                if frame.type == aiohttp.WSMsgType.TEXT:
                    self._dispatch(json.loads(frame.data))
                elif frame.type == aiohttp.WSMsgType.BINARY:
                    log.debug("ignoring a binary websocket frame from the gateway")
                elif frame.type == aiohttp.WSMsgType.ERROR:
                    reason = f"the kernel's websocket failed: {ws.exception()}"
                    break
        except asyncio.CancelledError:
            reason = "the channels were closed"
            raise
        except Exception as exc:  # a malformed frame or a broken connection: the channel is gone
            reason = f"reading the kernel's websocket failed: {exc}"
        finally:
            self.closed_reason = reason
            for q in self._queues.values():
                q.put_nowait(_CLOSED)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        self.last_received = time.monotonic()
        channel = msg.pop("channel", None) or "iopub"
        if channel == "iopub" and msg.get("header", {}).get("msg_type") == "status":
            state = msg.get("content", {}).get("execution_state")
            # The gateway's restarter sends these when the kernel process died (and it auto-restarts
            # it): the kernel state the session knew is gone, exactly like a local kernel's exit.
            if state in ("restarting", "dead", "autorestarting"):
                self.dead_reason = f"the gateway reported the kernel {state}"
        q = self._queues.get(channel)
        if q is not None:
            q.put_nowait(msg)

    def _message(self, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
        return {
            "header": {
                "msg_id": uuid.uuid4().hex,
                "msg_type": msg_type,
                "username": "continual-acp",
                "session": self.session_id,
                "date": datetime.now(UTC).isoformat(),
                "version": _PROTOCOL_VERSION,
            },
            "parent_header": {},
            "metadata": {},
            "content": content,
            "buffers": [],
        }

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        """Queue a message on `channel`; returns its msg_id (sent from a task: callers are sync)."""
        msg = self._message(msg_type, content)
        msg["channel"] = channel
        ws = self._ws
        if ws is None or ws.closed:
            raise ChannelClosed(self.closed_reason or "the kernel's websocket is not open")
        task = asyncio.get_running_loop().create_task(ws.send_str(json.dumps(msg)))
        task.add_done_callback(_log_send_failure)
        return str(msg["header"]["msg_id"])

    def execute(
        self,
        code: str,
        silent: bool = False,
        store_history: bool = True,
        user_expressions: dict[str, Any] | None = None,
        allow_stdin: bool | None = None,
        stop_on_error: bool = True,
    ) -> str:
        """Send an execute_request; returns its msg_id (the same signature as jupyter_client's)."""
        content = {
            "code": code,
            "silent": silent,
            "store_history": store_history,
            "user_expressions": user_expressions or {},
            "allow_stdin": self.allow_stdin if allow_stdin is None else allow_stdin,
            "stop_on_error": stop_on_error,
        }
        return self.send("shell", "execute_request", content)

    def kernel_info(self) -> str:
        """Send a kernel_info_request; returns its msg_id."""
        return self.send("shell", "kernel_info_request", {})

    def input(self, string: str) -> None:
        """Answer the kernel's pending input_request."""
        self.send("stdin", "input_reply", {"value": string})

    async def _get(self, channel: str, timeout: float | None) -> dict[str, Any]:
        q = self._queues[channel]
        try:
            item = await asyncio.wait_for(q.get(), timeout) if timeout is not None else await q.get()
        except TimeoutError:
            raise queue.Empty from None
        if item is _CLOSED:
            q.put_nowait(_CLOSED)  # every later reader sees the close too
            raise ChannelClosed(self.closed_reason or "the kernel's websocket closed")
        return dict(item)

    async def get_shell_msg(self, timeout: float | None = None) -> dict[str, Any]:
        """The next shell reply; `queue.Empty` after `timeout` seconds."""
        return await self._get("shell", timeout)

    async def get_iopub_msg(self, timeout: float | None = None) -> dict[str, Any]:
        """The next iopub message; `queue.Empty` after `timeout` seconds."""
        return await self._get("iopub", timeout)

    async def get_stdin_msg(self, timeout: float | None = None) -> dict[str, Any]:
        """The next stdin message (input_request); `queue.Empty` after `timeout` seconds."""
        return await self._get("stdin", timeout)

    async def get_control_msg(self, timeout: float | None = None) -> dict[str, Any]:
        """The next control reply; `queue.Empty` after `timeout` seconds."""
        return await self._get("control", timeout)

    async def wait_for_ready(self, timeout: float) -> None:
        """Send kernel_info requests until one is answered (the kernel is up), within `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg_id = self.kernel_info()
            step = time.monotonic() + 2.0
            while time.monotonic() < min(step, deadline):
                try:
                    reply = await self.get_shell_msg(timeout=0.5)
                except queue.Empty:
                    continue
                if reply.get("parent_header", {}).get("msg_id") == msg_id:
                    self._drain("iopub")
                    return
        raise TimeoutError(f"kernel {self.kernel_id} did not answer kernel_info within {timeout:g} s")

    def _drain(self, channel: str) -> None:
        q = self._queues[channel]
        while not q.empty():
            item = q.get_nowait()
            if item is _CLOSED:
                q.put_nowait(item)
                return

    @property
    def is_open(self) -> bool:
        return self._ws is not None and not self._ws.closed

    def stop_channels(self) -> None:
        """Close the websocket soon (sync, like jupyter_client's); `aclose` waits for it."""
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().create_task(self.aclose())

    async def aclose(self) -> None:
        """Close the websocket and its HTTP session."""
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 3.0)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        if self._http is not None:
            await self._http.close()
            self._http = None


def _log_send_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("sending to the gateway failed: %s", task.exception())
