"""Kernel-side client of the host bridge. Standard library only.

Imported inside the kernel as ``from kernel_bridge import hostclient as bridge`` (or injected by
source when the kernel's interpreter cannot import kernel_bridge). Cells call the host while they
run: ``bridge.call("harness.list")`` blocks; ``await bridge.acall("refine.run", scope="local")``
awaits. The host's errors arrive as ``HostError`` with the host's message.

Wire format: JSON lines over a Unix socket (or loopback TCP). The first line of a connection is
``{"token": ...}``; each request is ``{"id", "op", "args"}``, each response ``{"id", "ok", "result"}``
or ``{"id", "ok": false, "error"}``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import threading
from typing import Any

ADDRESS_VAR = "CONTINUAL_ACP_BRIDGE"
TOKEN_VAR = "CONTINUAL_ACP_BRIDGE_TOKEN"
# "1" when the host also answers over the kernel's stdin channel (a gateway or forced setting):
# used when the socket cannot be reached (a kernel on another machine). Address "stdin:" forces it.
STDIN_VAR = "CONTINUAL_ACP_BRIDGE_STDIN"
# The prompt of an input_request that carries a host call (the host answers it, not a person).
STDIN_PREFIX = "\x00continual-acp-host:"

__all__ = ["HostError", "HostRefused", "acall", "call"]


class HostError(Exception):
    """The host refused or failed the call; the message is the host's."""


class HostRefused(HostError, PermissionError):
    """The host refused the call (what it touches is not the cell's); the message says why."""


def _failure(reply: dict[str, Any]) -> HostError:
    message = str(reply.get("error", "unknown host error"))
    return HostRefused(message) if reply.get("kind") == "refused" else HostError(message)


_ids = itertools.count(1)
_local = threading.local()


class _Connection:
    """One socket per thread; a failed call closes it so a half-read reply is never reused."""

    def __init__(self, address: str, token: str) -> None:
        self.address = address
        if address.startswith("unix:"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(address[len("unix:") :])
        elif address.startswith("tcp:"):
            host, _, port = address[len("tcp:") :].rpartition(":")
            sock = socket.create_connection((host, int(port)))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            raise HostError(f"bad host bridge address {address!r} in ${ADDRESS_VAR}")
        self.sock = sock
        self.reader = sock.makefile("rb")
        self._send({"token": token})

    def _send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode("utf-8") + b"\n")

    def request(self, op: str, args: dict[str, Any]) -> Any:
        request_id = next(_ids)
        self._send({"id": request_id, "op": op, "args": args})
        while True:
            line = self.reader.readline()
            if not line:
                raise HostError("the host closed the bridge connection")
            reply = json.loads(line)
            # Replies to requests abandoned by an interrupt are skipped, never mistaken for ours.
            if reply.get("id") == request_id:
                break
        if reply.get("ok"):
            return reply.get("result")
        raise _failure(reply)

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()


def _connection() -> _Connection:
    address = os.environ.get(ADDRESS_VAR)
    token = os.environ.get(TOKEN_VAR)
    if not address or not token:
        raise HostError(f"no host bridge: ${ADDRESS_VAR} and ${TOKEN_VAR} are not set in this kernel")
    conn: _Connection | None = getattr(_local, "conn", None)
    if conn is None or conn.address != address:
        if conn is not None:
            conn.close()
        conn = _Connection(address, token)
        _local.conn = conn
    return conn


_socket_unreachable: list[str] = []  # the address that failed, so later calls go straight to stdin


def _use_stdin() -> bool:
    address = os.environ.get(ADDRESS_VAR, "")
    if address == "stdin:":
        return True
    return os.environ.get(STDIN_VAR) == "1" and address in _socket_unreachable


def _stdin_call(op: str, args: dict[str, Any]) -> Any:
    """One host call as an input_request on the kernel's stdin channel (works through gateways).

    Only while a cell runs (the host sends its cells with allow_stdin); the host's session answers
    the request with the reply JSON instead of showing a prompt.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        raise HostError("no host bridge: the stdin transport needs an IPython kernel") from None
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        raise HostError("no host bridge: the stdin transport needs an IPython kernel")
    request_id = next(_ids)
    payload = json.dumps({"id": request_id, "op": op, "args": args})
    try:
        answer = kernel.raw_input(STDIN_PREFIX + payload)
    except Exception as exc:  # StdinNotImplementedError outside a cell the host runs with stdin
        raise HostError(f"the host bridge over stdin is not available here: {exc}") from None
    try:
        reply = json.loads(answer)
    except ValueError:
        raise HostError(f"malformed host reply over stdin: {answer[:200]!r}") from None
    if not isinstance(reply, dict) or reply.get("id") != request_id:
        raise HostError("the host's stdin reply does not match this call")
    if reply.get("ok"):
        return reply.get("result")
    raise _failure(reply)


def call(op: str, **args: Any) -> Any:
    """Call host operation `op` with keyword arguments; block until the host answers."""
    try:
        json.dumps(args)
    except (TypeError, ValueError) as exc:
        raise HostError(f"arguments of {op!r} are not JSON-serialisable: {exc}") from None
    if _use_stdin():
        return _stdin_call(op, args)
    try:
        conn = _connection()
    except OSError as exc:
        # The host's socket is not reachable from here (a kernel on another machine).
        if os.environ.get(STDIN_VAR) != "1":
            raise HostError(f"cannot reach the host bridge at ${ADDRESS_VAR}: {exc}") from None
        _socket_unreachable.append(os.environ.get(ADDRESS_VAR, ""))
        return _stdin_call(op, args)
    try:
        return conn.request(op, args)
    except HostError:
        raise
    except BaseException:
        # Interrupted or broken mid-call: drop the socket so the next call starts clean.
        _local.conn = None
        conn.close()
        raise


async def acall(op: str, **args: Any) -> Any:
    """Awaitable form of `call`; the blocking socket work runs in a worker thread."""
    if _use_stdin():
        return call(op, **args)  # the kernel's stdin request must come from the cell's own thread
    return await asyncio.to_thread(lambda: call(op, **args))
