"""Host side of the bridge: kernel code calls named host operations while a cell runs.

Jupyter comms are not processed while a cell executes, so a cell waiting on a comm reply would
deadlock; this side channel does not depend on the kernel's message loop. One server per session,
created when the session is acquired; the kernel learns the address and token from its environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import shutil
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]

# Unix socket paths are limited to ~104-108 bytes depending on the platform.
_MAX_UNIX_PATH = 100
_MAX_LINE = 64 * 1024 * 1024


class HostBridge:
    """A JSON-lines server on a 0600 Unix socket (or loopback TCP) guarded by a random token.

    Handlers are registered per session by op name; a handler gets the call's keyword arguments as
    a dict and returns anything JSON-serialisable. Unknown ops, handler exceptions and results that
    cannot be serialised reach the kernel as `HostError` with the message built here.
    """

    def __init__(self, runtime_dir: Path | None = None, *, prefer_unix: bool = True) -> None:
        self._runtime_dir = runtime_dir
        self._prefer_unix = prefer_unix
        self._handlers: dict[str, Handler] = {}
        self._server: asyncio.Server | None = None
        self._socket_path: Path | None = None
        self._own_dir: Path | None = None  # made when no runtime dir was given
        self._connections: set[asyncio.StreamWriter] = set()
        self.token = secrets.token_urlsafe(32)
        self.address = ""
        self.calls_served = 0

    def register(self, op: str, handler: Handler) -> None:
        """Serve `op` with `handler` (replaces an earlier handler of the same name)."""
        if not op or not isinstance(op, str):
            raise ValueError(f"host op name must be a non-empty string, got {op!r}")
        self._handlers[op] = handler

    def unregister(self, op: str) -> None:
        """Stop serving `op` (unknown names are ignored)."""
        self._handlers.pop(op, None)

    @property
    def runtime_dir(self) -> Path | None:
        """The directory holding the bridge's socket (None before `start` made one of its own)."""
        return self._runtime_dir or self._own_dir

    @property
    def ops(self) -> list[str]:
        return sorted(op for op in self._handlers if not op.startswith("_kernel_bridge."))

    def environment(self) -> dict[str, str]:
        """The variables the kernel needs to reach this server."""
        from kernel_bridge.environment import BRIDGE_ADDRESS_VAR, BRIDGE_TOKEN_VAR

        return {BRIDGE_ADDRESS_VAR: self.address, BRIDGE_TOKEN_VAR: self.token}

    async def start(self) -> str:
        """Listen; returns the address (`unix:/path` or `tcp:127.0.0.1:port`)."""
        if self._server is not None:
            return self.address
        # asyncio has no Unix-socket server on Windows event loops.
        if self._prefer_unix and hasattr(socket, "AF_UNIX") and sys.platform != "win32":
            # The socket is made inside a 0700 directory, so nobody else can reach it in the moment
            # before the chmod. (Not by setting the umask: it is process-wide, and files other
            # coroutines created meanwhile would get it too.)
            if self._runtime_dir is None:
                self._own_dir = Path(tempfile.mkdtemp(prefix="cacp-bridge-"))
            directory = self._runtime_dir or self._own_dir
            assert directory is not None
            path = directory / f"bridge-{secrets.token_hex(4)}.sock"
            if len(os.fsencode(path)) <= _MAX_UNIX_PATH:
                self._server = await asyncio.start_unix_server(self._serve, path=str(path), limit=_MAX_LINE)
                os.chmod(path, 0o600)
                self._socket_path = path
                self.address = f"unix:{path}"
                return self.address
        self._server = await asyncio.start_server(self._serve, host="127.0.0.1", port=0, limit=_MAX_LINE)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"tcp:127.0.0.1:{port}"
        return self.address

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in list(self._connections):
            writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2.0)
        if self._socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self._socket_path.unlink()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            hello = await reader.readline()
            if not self._token_ok(hello):
                log.warning("host bridge: rejected a connection with a bad token")
                return
            while True:
                line = await reader.readline()
                if not line:
                    return
                reply = await self._answer(line)
                writer.write(json.dumps(reply).encode("utf-8") + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
            log.debug("host bridge connection ended: %s", exc)
        finally:
            self._connections.discard(writer)
            writer.close()

    async def answer(self, line: bytes) -> dict[str, Any]:
        """Answer one JSON request line (for a transport other than the socket: the kernel's stdin)."""
        return await self._answer(line)

    def _token_ok(self, line: bytes) -> bool:
        try:
            token = json.loads(line).get("token", "")
        except (ValueError, AttributeError):
            return False
        return isinstance(token, str) and hmac.compare_digest(token.encode(), self.token.encode())

    async def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
            request_id = request.get("id")
            op = request.get("op")
            args = request.get("args", {})
        except (ValueError, AttributeError):
            return {"id": None, "ok": False, "error": "malformed host bridge request (not a JSON object)"}
        if not isinstance(args, dict):
            return {"id": request_id, "ok": False, "error": f"arguments of {op!r} must be an object"}
        handler = self._handlers.get(op) if isinstance(op, str) else None
        if handler is None:
            known = ", ".join(self.ops) or "none registered"
            return {"id": request_id, "ok": False, "error": f"unknown host operation {op!r} (known: {known})"}
        if not op.startswith("_kernel_bridge."):  # count the session's own ops, not internal ones
            self.calls_served += 1
        try:
            result = await handler(args)
        except PermissionError as exc:
            # A refusal (the host-call policy's, or the OS's): the kernel raises it as a
            # PermissionError, with the handler's message as it is (it names the op and the path).
            log.info("host op %s refused: %s", op, exc)
            return {"id": request_id, "ok": False, "error": str(exc) or f"{op}: refused", "kind": "refused"}
        except Exception as exc:
            log.info("host op %s failed: %r", op, exc)
            return {"id": request_id, "ok": False, "error": f"{op}: {type(exc).__name__}: {exc}"}
        try:
            json.dumps(result)
        except (TypeError, ValueError) as exc:
            return {"id": request_id, "ok": False, "error": f"{op}: result is not JSON-serialisable: {exc}"}
        return {"id": request_id, "ok": True, "result": result}
