"""Answer the editor's first `session/new` before asyncio, anyio or the Agent's modules load.

An editor sends `session/new` as soon as the early `initialize` answer (early_initialize.py)
reaches it, then waits; the full server would make it wait for the Agent's imports. So `serve`
reads the next line too (waiting at most `WAIT_SECONDS`): when it is a plain `session/new` (a cwd,
no MCP servers, nothing else) and `agent_core.fresh_session.reserve` can reserve the session (see
its docstring: anything unusual leaves the answer to the full path, errors included), the answer
is written here, once the session is on disk (its transcript header, `meta.json` and owner lock,
as the store writes a new one). The server's Agent then takes it over
(`AcpServer.adopt_early_session`) before another request is read, so none finds it half open;
should that fail after all, every use of the id here answers that failure. Anything else is handed
to the transport unread (`EarlyStart.unread`), as before.

Only a v1 connection: a v2 one (acp_server/v2) has its answers translated by the transport.
"""

from __future__ import annotations

import json

from acp_server.process.early_initialize import (
    EarlySession,
    EarlyStart,
    read_first_line,
    request_line,
    write_all,
)
from acp_server.protocol import frames
from acp_server.sessions.config_options import config_options, kernel_meta, modes_state
from acp_server.v2.switch import speaks_v2

# The editor's `session/new` follows the `initialize` answer within a round trip; one that comes
# later finds the full server (this wait only delays its imports).
WAIT_SECONDS = 0.1
PLAIN_PARAMS = frozenset({"cwd", "mcpServers"})


def _plain_new_session(line: bytes) -> tuple[int | str, dict[str, object], str] | None:
    """`(id, params, cwd)` of a `session/new` request with an absolute cwd and no MCP servers, else None."""
    request = request_line(line, "session/new")
    if request is None:
        return None
    ident, params = request
    if not isinstance(params, dict) or set(params) != PLAIN_PARAMS or params["mcpServers"] != []:
        return None
    cwd = params["cwd"]
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        return None
    return ident, params, cwd


def answer_first_session_new(
    read_fd: int, write_fd: int, early: EarlyStart, *, wait: float = WAIT_SECONDS
) -> EarlyStart:
    """After an early `initialize` answer: answer the next line if it is a plain `session/new` the
    session can be reserved for (see the module docstring); `early` with `session` set and the
    bytes read past it, else `early` with every byte read kept for the transport."""
    if early.params is None or speaks_v2(early.params.get("protocolVersion")):
        return early
    data, _ended = read_first_line(read_fd, wait, early.unread)
    newline = data.find(b"\n")
    request = _plain_new_session(data[:newline]) if newline >= 0 else None
    fresh = None
    if request is not None:
        from agent_core.fresh_session import reserve

        fresh = reserve(request[2])
    if request is None or fresh is None:
        return EarlyStart(early.params, data)
    ident, params, _cwd = request
    result = frames.new_session_response(
        fresh.session_id, modes_state(fresh), config_options(fresh), kernel_meta(fresh.guarantees)
    )
    line = json.dumps(frames.result_message(ident, result), separators=(",", ":")) + "\n"
    try:
        write_all(write_fd, line.encode("ascii"))  # ASCII: an id may hold lone surrogates
    except OSError:
        pass  # the client is gone: the transport sees the end of input and shuts down as usual
    answered = EarlyStart(early.params, data[newline + 1 :])
    answered.session = EarlySession(ident, params, fresh, result)
    return answered
