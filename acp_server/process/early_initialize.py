"""Answer the editor's first `initialize` before the server imports anything heavy.

An editor spawns the agent, sends `initialize` at once and waits for the answer. So `serve` reads
the first line right after reserving stdio (waiting at most `WAIT_SECONDS`, with select), before
asyncio, anyio, the method table or agent_core are imported; when that line is a well-formed
`initialize` request it is answered here, from initialize.py and frames.py alone, and the server
then starts with its params (`AcpServer.initialized_early`). Anything else (another method, bad
JSON or params, a client that has not written yet, a line over `MAX_FIRST_LINE`) is answered by
the transport as always: the bytes read here are handed to it first (`EarlyStart.unread`).
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from acp_server.protocol import frames
from acp_server.protocol.errors import AcpError
from acp_server.protocol.initialize import check_initialize_params, initialize_answer

# The answered session lives here, beside `EarlyStart`, so early_session.py imports this module
# and not the other way round.
if TYPE_CHECKING:
    from agent_core.fresh_session import FreshSession

WAIT_SECONDS = 0.25
MAX_FIRST_LINE = 1 << 20
READ_CHUNK = 1 << 16


class EarlySession:
    """A `session/new` answered early: its request, the reserved session and the result sent. (A
    plain class: a dataclass compiles its methods at import, on the path this module is on.)"""

    __slots__ = ("fresh", "params", "request_id", "result")

    def __init__(
        self, request_id: int | str, params: dict[str, object], fresh: FreshSession, result: dict[str, object]
    ) -> None:
        self.request_id = request_id
        self.params = params
        self.fresh = fresh
        self.result = result


class EarlyStart:
    """What the early read did: the answered `initialize`'s params (None when it answered nothing)
    and the bytes it read that the transport must see before anything else from the fd."""

    __slots__ = ("ended", "params", "session", "unread")

    def __init__(self, params: dict[str, object] | None, unread: bytes, ended: bool = False) -> None:
        self.params = params
        self.unread = unread
        # The input ended before a single byte came (stdin at /dev/null, an empty file, a closed pipe).
        self.ended = ended
        # The `session/new` answered right after it (early_session.py), which the server must create.
        self.session: EarlySession | None = None


def read_first_line(fd: int, wait: float, already: bytes = b"") -> tuple[bytes, bool]:
    """`already` and the bytes from `fd` up to and past the first newline, or whatever came within
    `wait` seconds (stops early at end of input, at `MAX_FIRST_LINE` bytes, or when the fd cannot be
    polled), and whether the input ended."""
    deadline = time.monotonic() + wait
    buf = bytearray(already)
    while b"\n" not in buf and len(buf) < MAX_FIRST_LINE:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                break
            chunk = os.read(fd, READ_CHUNK)
        except (OSError, ValueError):
            break
        if not chunk:
            return bytes(buf), True
        buf += chunk
    return bytes(buf), False


def request_line(line: bytes, method: str) -> tuple[int | str, object] | None:
    """`(id, params)` of a well-formed JSON-RPC request for `method` (an int or string id), else
    None: what the early answers take over; anything else goes to the transport untouched."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    ident = message.get("id")
    if message.get("method") != method or not isinstance(ident, int | str) or isinstance(ident, bool):
        return None
    return ident, message.get("params")


def _initialize_request(line: bytes) -> tuple[int | str, dict[str, object]] | None:
    """`(id, params)` of a well-formed `initialize` request that passes the hand check, else None."""
    request = request_line(line, "initialize")
    if request is None:
        return None
    ident, params = request
    try:
        check_initialize_params(params)
    except AcpError:
        return None
    assert isinstance(params, dict)
    return ident, params


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def answer_first_initialize(
    read_fd: int,
    write_fd: int,
    extension_methods: Sequence[str],
    extension_notifications: Sequence[str],
    *,
    wait: float = WAIT_SECONDS,
) -> EarlyStart:
    """Answer the first input line if it is an `initialize` request (see the module docstring)."""
    data, ended = read_first_line(read_fd, wait)
    newline = data.find(b"\n")
    request = _initialize_request(data[:newline]) if newline >= 0 else None
    if request is None:
        return EarlyStart(None, data, ended=ended and not data)
    ident, params = request
    answer = frames.result_message(
        ident,
        initialize_answer(
            extension_methods,
            extension_notifications,
            params.get("protocolVersion"),
            params.get("clientCapabilities"),
        ),
    )
    line = json.dumps(answer, separators=(",", ":")) + "\n"  # ASCII: an id may hold lone surrogates
    try:
        write_all(write_fd, line.encode("ascii"))
    except OSError:
        pass  # the client is gone: the transport sees the end of input and shuts down as usual
    return EarlyStart(params, data[newline + 1 :])
