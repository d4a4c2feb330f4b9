"""What the subagent hub uses of a session (parent or child) and of the agent, typed without
importing either.

The session declares the hub as its `subagents` slot, so this package must not import
agent_core.session (not even for annotations: the two would form an import cycle). `Session` meets
this Protocol structurally; mypy checks it where the agent hands a session to the hub.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agent_core import events as ev

if TYPE_CHECKING:
    from agent_core.autonomy.controller import SessionAutonomy
    from agent_core.bus import EventBus
    from agent_core.config.loader import AgentConfig
    from agent_core.history.transcript import SessionStore
    from agent_core.model_events import Usage
    from agent_core.ports import EditorPort
    from harness_store import HarnessStore


class SubagentSession(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    @property
    def editor(self) -> EditorPort: ...

    @property
    def title(self) -> str | None: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def autonomy(self) -> SessionAutonomy | None: ...

    @property
    def mode(self) -> str: ...

    @property
    def model_name(self) -> str | None: ...

    @property
    def usage_totals(self) -> Usage: ...

    @property
    def messages(self) -> list[dict[str, Any]]: ...

    @property
    def local_store(self) -> HarnessStore: ...

    @property
    def global_store(self) -> HarnessStore: ...

    def available_models(self) -> list[str]: ...

    def set_mode(self, mode: str) -> None: ...

    def set_config(self, key: str, value: Any) -> None: ...

    def run_turn(self, parts: Sequence[ev.PromptPart]) -> AsyncIterator[ev.TurnEvent]: ...

    async def publish(self, event: ev.TurnEvent) -> None: ...

    async def cancel(self) -> None: ...

    async def judge_host_call(self, op: str, access: Literal["read", "write"], path: str) -> str:
        """`path` as the session's host-call policy resolved it; PermissionError when it refuses."""
        ...


class SubagentAgent(Protocol):
    """What the hub uses of the agent that owns it (`Agent` is one): config, transcripts, and making,
    finding and closing the child sessions."""

    @property
    def config(self) -> AgentConfig: ...

    @property
    def store(self) -> SessionStore: ...

    async def new_session(self, cwd: str, editor: EditorPort) -> SubagentSession: ...

    def get_session(self, session_id: str) -> SubagentSession | None: ...

    async def close_session(self, session_id: str) -> None: ...
