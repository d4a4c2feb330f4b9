"""`OpenSession`: one agent_core session bound to this connection, with what the server keeps for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    # Typing only: acp_server imports agent_core off the startup path (see methods.py).
    from acp_server.editor import JsonRpcEditor
    from acp_server.presenter import TurnPresenter
    from agent_core.refinement.surface import HarnessSurface
    from agent_core.session import Session


@dataclass
class OpenSession:
    """A session bound to this connection: the session, its editor and presenter, its harness."""

    session: Session
    editor: JsonRpcEditor
    presenter: TurnPresenter
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
    """A session was bound to the connection and set up (published on `AcpServer.bus`)."""

    opened: OpenSession


@dataclass(frozen=True)
class SessionReplayed:
    """A session/load replay was sent, before the response (published, awaited, on `AcpServer.bus`)."""

    opened: OpenSession
