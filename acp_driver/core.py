"""The client's protocol state, without I/O: ids, pending requests, the answers to the agent's
requests, and the session updates received.

A transport writes what the core's methods return and feeds it what it reads; the core never
touches a pipe, a thread or an event loop, so the same logic serves the asyncio transport
(`aio.py`), the thread transport (`threaded.py`) and tests that feed it bytes directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from acp_driver.framing import LINE_LIMIT, BadLine, LineDecoder, encode, parse
from acp_driver.policy import INTERNAL_ERROR, AgentRequestError, ClientPolicy

# direction ("in": read from the agent, "out": written to it) and the message, before it is acted on
FrameLog = Callable[[str, dict[str, Any]], None]


def id_key(request_id: Any) -> str:
    """A request id as a dict key that tells 1 from "1" and True (JSON keeps them apart too)."""
    return json.dumps(request_id)


@dataclass(frozen=True)
class Response:
    """The agent's answer to one of our requests; `method` is None when no pending request had its
    id (an answer to a line sent raw, or a duplicate)."""

    message: dict[str, Any]
    method: str | None

    @property
    def request_id(self) -> Any:
        return self.message.get("id")


@dataclass(frozen=True)
class AgentRequest:
    """A request from the agent (it has an id): it waits for our answer (`ClientCore.answer`)."""

    message: dict[str, Any]


@dataclass(frozen=True)
class Notification:
    """A message from the agent that needs no answer (`session/update`, `_harness/...`)."""

    message: dict[str, Any]


Incoming = Response | AgentRequest | Notification | BadLine


class ClientCore:
    def __init__(
        self,
        policy: ClientPolicy | None = None,
        *,
        frame_log: FrameLog | None = None,
        line_limit: int = LINE_LIMIT,
    ) -> None:
        self.policy = policy or ClientPolicy()
        self.frame_log = frame_log
        self.decoder = LineDecoder(line_limit)
        self.updates: list[dict[str, Any]] = []  # every session/update's params, in arrival order
        self._pending: dict[str, str] = {}  # id_key -> method
        self._next_id = 0

    # ------------------------------------------------------------ outgoing

    def request(self, method: str, params: Any = None, *, request_id: Any = None) -> tuple[Any, bytes]:
        """A new request (the next integer id unless one is given) and its line; it is pending until
        its response arrives."""
        if request_id is None:
            self._next_id += 1
            request_id = self._next_id
        self._pending[id_key(request_id)] = method
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return request_id, self.outgoing(message)

    def notification(self, method: str, params: Any = None) -> bytes:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return self.outgoing(message)

    def outgoing(self, message: dict[str, Any]) -> bytes:
        """Any message as its line, logged as "out"."""
        if self.frame_log is not None:
            self.frame_log("out", message)
        return encode(message)

    def method_of(self, request_id: Any) -> str | None:
        """The method of a pending request."""
        return self._pending.get(id_key(request_id))

    def pending(self) -> list[str]:
        """The id keys of the requests not answered yet."""
        return list(self._pending)

    # ------------------------------------------------------------ incoming

    def feed(self, data: bytes) -> list[Incoming]:
        """What a chunk read from the agent completed, classified, in order."""
        return [self.receive(line) for line in self.decoder.feed(data)]

    def end(self) -> list[Incoming]:
        """The agent's output ended: a cut-off last line, if any."""
        return [self.receive(line) for line in self.decoder.end()]

    def receive(self, line: bytes | BadLine) -> Incoming:
        """One line: parsed, logged as "in", matched to its request or classified."""
        message = line if isinstance(line, BadLine) else parse(line)
        if isinstance(message, BadLine):
            return message
        if self.frame_log is not None:
            self.frame_log("in", message)
        if "method" in message:
            if message.get("method") == "session/update" and isinstance(message.get("params"), dict):
                self.updates.append(message["params"])
            return AgentRequest(message) if "id" in message else Notification(message)
        return Response(message, self._pending.pop(id_key(message.get("id")), None))

    def session_updates(self, session_id: str) -> list[dict[str, Any]]:
        """The `update` objects received for one session, in arrival order."""
        return [p.get("update", {}) for p in self.updates if p.get("sessionId") == session_id]

    # ------------------------------------------------------------ answering the agent

    def reply(self, request: AgentRequest) -> dict[str, Any] | None:
        """The response message the policy gives, or None when it leaves the request unanswered."""
        request_id = request.message.get("id")
        try:
            result = self.policy.answer(request.message)
        except AgentRequestError as exc:
            return {"jsonrpc": "2.0", "id": request_id, "error": exc.error()}
        except Exception as exc:  # a policy bug must answer, not leave the agent waiting forever
            error = {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}
            return {"jsonrpc": "2.0", "id": request_id, "error": error}
        if result is None:
            return None
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def answer(self, request: AgentRequest) -> bytes | None:
        """`reply` as the line to write (logged), or None."""
        reply = self.reply(request)
        return None if reply is None else self.outgoing(reply)
