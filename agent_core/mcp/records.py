"""What agent_core says about MCP servers: errors, states, notices (frozen records, no SDK types)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

State = Literal["connecting", "ready", "failed", "stopped"]


class McpOpError(RuntimeError):
    """An MCP operation that did not give a result; `kind` tells the kernel which exception to raise.

    kinds: `tool_error` (the server answered isError or a protocol error), `timeout`, `unavailable`
    (failed, crashed, still connecting), `not_found` (no such server/tool), `denied` (the user said no).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class McpNotice:
    """A user-visible notice about one server (failed to start, crashed, a call timed out).

    Exposed through `McpRegistry.notices` and its listeners; acp_server can show it as a `notice`
    update (or a message) once that surface exists.
    """

    server: str
    level: Literal["warning", "error"]
    message: str
    at: float = field(default_factory=time.time)
