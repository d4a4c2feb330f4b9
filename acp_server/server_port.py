"""What acp_server's feature modules need from the server, and the context a slash command runs in.

`ServerPort` is a `Protocol` so that the modules it serves (commands, `harness/*`) annotate the
server without importing `methods.py` (which imports them): the arrows stay one-way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from acp_server.capabilities import ClientCapabilities
    from acp_server.open_session import OpenSession
    from acp_server.registry import MethodRegistry
    from acp_server.v2.dialect import V2Dialect
    from agent_core.agent import Agent
    from agent_core.refinement.surface import HarnessSurface
    from agent_core.session import Session

JsonObject = dict[str, object]
Reply = Callable[[str], Awaitable[None]]


class ServerPort(Protocol):
    """The server as the features see it: send to the client, find an open session."""

    extension_notifications: list[str]
    client: ClientCapabilities  # what the client offered in `initialize`
    sessions: dict[str, OpenSession]  # the sessions bound to this connection, by id

    async def send_update(self, session_id: str, update: JsonObject) -> None: ...

    async def notify(self, method: str, params: JsonObject) -> None: ...

    async def open_session(self, session_id: str) -> OpenSession: ...


class ForkHost(ServerPort, Protocol):
    """The server a `/fork` asks for a new session bound to the same connection."""

    async def fork_into(
        self,
        source: OpenSession,
        *,
        turns: int | None = None,
        cwd: str | None = None,
        servers: list[Any] | None = None,
    ) -> tuple[OpenSession, str]: ...


class HarnessHost(ServerPort, Protocol):
    """The server an extension (`harness.methods.install`) extends: its method table too."""

    registry: MethodRegistry

    async def agent(self) -> Agent: ...


class PromptHost(HarnessHost, Protocol):
    """What `session/prompt` needs from the server beyond the `HarnessHost`."""

    async def cancel_session(self, session_id: str) -> None: ...

    async def refresh_commands(self, opened: OpenSession) -> None: ...

    def v2_dialect(self) -> V2Dialect | None: ...


@dataclass(frozen=True)
class CommandContext:
    """One slash command's world: the server, the open session and its harness, and how to answer."""

    server: ServerPort
    opened: OpenSession
    reply: Reply
    # Announces an agent-side mode switch (`current_mode_update` + `config_option_update`).
    on_mode_change: Callable[[], Awaitable[None]] | None = None
    # A reply whose words the transcript must not keep (a secret the editor shows once): the live
    # text, then what the transcript records instead. The data dir is readable by cells on the local
    # backend; nothing that grants authority may be written there.
    reply_once: Callable[[str, str], Awaitable[None]] | None = None

    @property
    def session(self) -> Session:
        return self.opened.session

    @property
    def harness(self) -> HarnessSurface:
        return self.opened.harness
