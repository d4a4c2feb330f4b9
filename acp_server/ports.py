"""acp_server's ports: what its features (commands, cards, `harness/*`, the panel, the extensions)
need from the server, the client editor and a turn's presenter, and the records that cross them.

Features annotate these and never the concrete `AcpServer` (sessions/methods.py), `JsonRpcEditor`
(sessions/editor.py) or `TurnPresenter` (turn/presenter.py): those import the features, so a
feature that named them, even for the type checker, would close an import cycle. This module
imports no feature module of acp_server, not even for typing; the only acp_server modules it names
are the method table (protocol/registry.py) and the v2 dialect (v2/dialect.py), which import no
port user.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio

if TYPE_CHECKING:
    # Typing only: acp_server imports agent_core off the startup path (see methods.py).
    from anyio.abc import TaskGroup

    from acp_server.protocol.registry import MethodRegistry
    from acp_server.v2.dialect import V2Dialect
    from agent_core.agent import Agent
    from agent_core.bus import EventBus
    from agent_core.refinement.surface import HarnessSurface
    from agent_core.session import Session

JsonObject = dict[str, object]
Reply = Callable[[str], Awaitable[None]]


# ---------------------------------------------------------------- the client editor and the presenter


class ClientEditorPort(Protocol):
    """The client editor as a feature asks it: permission cards, forms, cancelling what waits. (What
    a session asks of it, files and cell permissions, is agent_core's `EditorPort`.)"""

    @property
    def can_elicit_forms(self) -> bool: ...

    async def ask(
        self, tool_call: Mapping[str, object], options: Sequence[Mapping[str, object]]
    ) -> str | None: ...

    async def elicit_form(
        self, message: str, schema: Mapping[str, object], *, tool_call_id: str | None = None
    ) -> tuple[str, dict[str, object]] | None: ...

    def cancel_pending_permissions(self) -> int: ...


class PresenterPort(Protocol):
    """A session's turn events as `session/update`s: what a prompt, a replay or a card sends through."""

    stop_reason: str | None
    replayed_subagents: dict[str, str]  # child session id -> last replayed state

    @property
    def path_titles(self) -> bool: ...

    def attach(self, task_group: TaskGroup | None, *, replay: bool = False) -> None: ...

    async def present(self, event: object) -> None: ...

    async def close(self) -> None: ...

    async def send_update(self, update: dict[str, object]) -> None: ...


# ---------------------------------------------------------------- a session bound to the connection


@dataclass
class OpenSession:
    """A session bound to this connection: the session, its editor and presenter, its harness."""

    session: Session
    editor: ClientEditorPort
    presenter: PresenterPort
    # Finishes the session's setup (agent_core's `on_session`: refinement, autonomous mode) and
    # returns its harness; run once, by `set_up()` (methods.py: right after the session/new answer,
    # or at the first use of the session, whichever comes first).
    build_harness: Callable[[], HarnessSurface] = field(repr=False)
    # Run once with this session right after its harness is built (the harness events subscription,
    # `SessionBound` on the server's bus).
    on_harness: Callable[[OpenSession], None] | None = field(default=None, repr=False)
    prompt_lock: anyio.Lock = field(default_factory=anyio.Lock)
    # Bumped by every session/cancel. A prompt compares it with the value it saw on arrival, so a
    # prompt queued behind a running one is cancelled too (it never reaches agent_core).
    cancel_generation: int = 0
    unsubscribe: Callable[[], None] | None = None
    # The `/skill:<name>` commands last advertised, so a change (a skill folder added) is re-announced.
    advertised_skills: tuple[str, ...] = ()
    # Proposals whose review card the client has been shown (harness/review.py settles them).
    shown_reviews: set[str] = field(default_factory=set)
    # Cancel scopes of the prompt-path work that is not an agent_core turn (a slash command that
    # asks the model: `/refine`'s planner, `/compact`'s summary): session/cancel cancels them.
    cancel_scopes: set[anyio.CancelScope] = field(default_factory=set)
    # session/prompt requests received and not yet answered: while there is one, `_session/steer`
    # is accepted even before its turn has started (it waits for the turn's first model request).
    unanswered_prompts: int = 0
    # How the last prompt's turn ended: what a prompt that joined it (`while_busy = steer`) answers.
    last_stop_reason: str | None = None

    _harness: HarnessSurface | None = field(default=None, init=False, repr=False)

    @property
    def harness(self) -> HarnessSurface:
        """The session's harness (both stores, through its refinement coordinator): every harness
        command, `_harness/*` method and refinement card goes through it."""
        if self._harness is None:
            self.set_up()
        assert self._harness is not None
        return self._harness

    @property
    def is_set_up(self) -> bool:
        """Whether `set_up()` has run (session/new defers it until after its answer)."""
        return self._harness is not None

    def set_up(self) -> None:
        """Finish the session's setup and subscribe its harness events; idempotent, synchronous (no
        request can see the session half set up)."""
        if self._harness is not None:
            return
        self._harness = self.build_harness()
        if self.on_harness is not None:
            self.on_harness(self)

    @contextmanager
    def cancellable(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope that `cancel_work()` (session/cancel, `$/cancel_request`) cancels."""
        scope = anyio.CancelScope()
        self.cancel_scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self.cancel_scopes.discard(scope)

    def cancel_work(self) -> None:
        """Cancel every running `cancellable()` block: its model requests are closed at once."""
        for scope in list(self.cancel_scopes):
            scope.cancel()


@dataclass(frozen=True)
class SessionBound:
    """A session was bound to the connection and set up (published on the server's `bus`)."""

    opened: OpenSession


@dataclass(frozen=True)
class SessionReplayed:
    """A session/load replay was sent, before the response (published, awaited, on the server's `bus`)."""

    opened: OpenSession


# ---------------------------------------------------------------- the server


class ClientOffer(Protocol):
    """What the client offered in `initialize`, as far as the features read it (capabilities.py)."""

    @property
    def quiescence(self) -> bool: ...

    @property
    def subagents(self) -> bool: ...

    @property
    def usage(self) -> bool: ...


class ServerPort(Protocol):
    """The server as the features see it: send to the client, find an open session."""

    extension_notifications: list[str]
    sessions: dict[str, OpenSession]  # the sessions bound to this connection, by id

    @property
    def client(self) -> ClientOffer: ...  # what the client offered in `initialize`

    async def send_update(self, session_id: str, update: JsonObject) -> None: ...

    async def notify(self, method: str, params: JsonObject) -> None: ...

    async def open_session(self, session_id: str) -> OpenSession: ...


class ExtensionHost(ServerPort, Protocol):
    """The server an extension that keeps per-session state (subagent cards, the quiescence file)
    installs itself on: `SessionBound` / `SessionReplayed` arrive on its bus."""

    bus: EventBus


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
