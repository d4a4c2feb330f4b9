"""The agent: one per server process. Owns the model client, the kernel pool and the sessions.

Its kernels (the pool, the backend check, the factory that starts a session's kernel) are its part
`AgentKernels` (kernel/agent_kernels.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agent_core import events as ev
from agent_core.bus import EventBus, ShuttingDown
from agent_core.config.loader import AgentConfig
from agent_core.errors import SessionNotFound
from agent_core.history.transcript import SessionPage, SessionStore, TranscriptDamaged, resolve_cwd
from agent_core.kernel.agent_kernels import AgentKernels
from agent_core.kernel.hibernation import Hibernator
from agent_core.mcp import ServerConfig, attach_mcp, configure_mcp
from agent_core.model import ModelClient
from agent_core.ports import EditorPort, NoSkills, SkillsPort
from agent_core.session import Session

if TYPE_CHECKING:
    from agent_core.fresh_session import FreshSession
    from agent_core.history.fork import SavedSession
    from agent_core.history.ownership import SessionOwnerLock
    from agent_core.subagents.hub import SubagentHub
    from agent_core.trust.promotion import DeletionNotice
    from harness_store import HarnessStore
    from kernel_bridge import KernelPool

log = logging.getLogger(__name__)


class Agent(AgentKernels):
    """Create with an `AgentConfig`; `await start()` once, `await aclose()` at exit.

    `skills` is the composition root's bridge to the kernel-side skills (agent_core may not import
    them); `on_session` is called with every session created or loaded (the refinement and
    autonomous-mode features attach there: their slots, their subscriptions on `session.bus`).
    """

    def __init__(
        self,
        config: AgentConfig,
        *,
        skills: SkillsPort | None = None,
        on_session: Callable[[Session], None] | None = None,
    ) -> None:
        self.config = config
        self.skills: SkillsPort = skills or NoSkills()
        self.on_session = on_session
        self.model = ModelClient(config)  # shared: the planner/reviewer reuse it (`agent.model.complete`)
        self.store = SessionStore(config.home)
        self._pool: KernelPool | None = None
        self._local_interpreter_checked = False  # check_kernel_backend found ipykernel (local backend)
        self._pool_lock = asyncio.Lock()
        self._sessions: dict[str, Session] = {}
        self._global_store: HarnessStore | None = None
        # What the agent tells its features (agent_core.bus): `ShuttingDown`, published first by
        # `aclose`, before sessions close (the subagent hub stops admitting there).
        self.bus = EventBus("the agent")
        self.subagents: SubagentHub | None = None  # set by SubagentHub.install
        # When set, every session's kernel start waits for it (acp_server opens it right after its
        # first session response is written: a kernel starting beside session/new slows the answer).
        self.kernel_gate: asyncio.Event | None = None
        self._closing = False
        # Sessions made with `new_session(defer_setup=True)` whose `on_session` has not run yet.
        self._setup_pending: set[str] = set()
        self._room_tasks: set[asyncio.Task[bool]] = set()
        revive = self._kernel_factory(restore=True, revive=True)
        self.hibernator = Hibernator(
            lambda: list(self._sessions.values()),
            idle_seconds=config.kernel_idle_minutes * 60,
            revive=lambda session: lambda: revive(session),
            running_children=self._running_children,
        )

    def _running_children(self, session_id: str) -> int:
        hub = self.subagents
        return int(hub.running_children(session_id)) if hub is not None else 0

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Returns fast; the kernel pool warms in the background.

        A kernel that cannot start (a wrong `kernel_python`) does not stop the agent: it is logged
        here and reported on each cell that needs the kernel, with the reason.
        """
        try:
            await self._kernel_pool()
        except Exception as exc:
            log.error("the kernel pool could not start: %s", exc)
        self.hibernator.start()

    async def aclose(self) -> None:
        """Cancel turns, take final snapshots, shut every kernel down."""
        self._closing = True
        await self.hibernator.aclose()
        self._setup_pending.clear()  # a closing agent sets up no session
        if self.kernel_gate is not None:
            self.kernel_gate.set()  # held kernel starts give up (a session's close waits for its start)
        await self.bus.publish(ShuttingDown())  # subagents stop before their sessions close
        sessions, self._sessions = list(self._sessions.values()), {}
        # Concurrently: each close waits for a final snapshot, and an editor exit must not take N x that.
        results = await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        for session, result in zip(sessions, results, strict=True):
            if isinstance(result, BaseException):
                log.error("closing session %s failed: %r", session.id, result)
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None
        await self.model.aclose()

    @property
    def global_store(self) -> HarnessStore:
        if self._global_store is None:
            from harness_store import HarnessStore

            self._global_store = HarnessStore(self.config.home / "harness")
        return self._global_store

    # ------------------------------------------------------------ sessions

    def _make(
        self,
        session_id: str,
        cwd: str,
        editor: EditorPort,
        *,
        restore: bool,
        mcp_servers: Sequence[ServerConfig] = (),
        setup: bool = True,
        reserved: FreshSession | None = None,
        locked: SessionOwnerLock | None = None,
        **state: object,
    ) -> Session:
        from agent_core.history.ownership import SessionOwnerLock

        if reserved is not None:
            # Written and locked by fresh_session.reserve: its header is there, its lock already ours.
            owner = reserved.owner
            writer = self.store.open(session_id)
        elif restore:
            # Locked before the transcript is opened: another process may be appending to it.
            owner = locked or SessionOwnerLock.acquire(self.store.session_dir(session_id), session_id)
            try:
                writer = self.store.open(session_id)
            except BaseException:
                owner.release()
                raise
        else:
            writer = self.store.create(session_id, cwd)
            owner = SessionOwnerLock.acquire(self.store.session_dir(session_id), session_id)
        session = Session(
            session_id=session_id,
            cwd=cwd,
            editor=editor,
            agent_config=self.config,
            model=self.model,
            store=self.store,
            writer=writer,
            global_store=self._global_store,
            skills=self.skills,
            kernel_factory=self._kernel_factory(restore=restore),
            **state,  # type: ignore[arg-type]
        )
        session.owner_lock = owner
        session.kernel_handle.clock = lambda: self.hibernator.clock()  # a test may swap the clock
        session.kernel_handle.touch()
        session.hibernation_line = lambda: self.hibernator.status_line(session)
        self._sessions[session_id] = session
        # Before the kernel is ready (its hook registers `mcp.*`); servers start on `session.mcp.start()`
        # (acp_server: after its response) or at their first use.
        attach_mcp(session, mcp_servers, start=False)
        if setup:
            self._run_on_session(session)
        else:
            self._setup_pending.add(session_id)
        return session

    def _run_on_session(self, session: Session) -> None:
        if self.on_session is not None:
            self.on_session(session)

    def finish_setup(self, session: Session) -> None:
        """Run the `on_session` seam (refinement, autonomous mode) of a session made with
        `new_session(defer_setup=True)`, once; a no-op for every other session and every later call.
        The kernel start calls it before the kernel's hooks run, so its host ops are never missed."""
        if session.id in self._setup_pending:
            self._setup_pending.discard(session.id)
            self._run_on_session(session)

    async def new_session(
        self,
        cwd: str,
        editor: EditorPort,
        mcp_servers: Sequence[ServerConfig] = (),
        *,
        defer_setup: bool = False,
        reserved: FreshSession | None = None,
    ) -> Session:
        """A fresh session; its kernel starts (or comes from the pool) in the background.

        `defer_setup`: `on_session` waits for `finish_setup(session)` (acp_server calls it right after
        the session/new answer is written: the refinement imports would otherwise delay the answer).
        Call it before the session is used; its kernel start calls it too.

        `reserved`: a session `fresh_session.reserve` wrote (and acp_server answered) before this
        Agent existed: it is taken over, its files and owner lock as they are."""
        cwd = resolve_cwd(cwd)
        if not Path(cwd).is_dir():
            # Caught here, not at the first cell: the kernel would run nowhere.
            raise ValueError(f"session cwd {cwd!r} is not an existing directory")
        await self.check_kernel_backend()
        from agent_core.history.transcript import now_iso

        if reserved is not None:
            if reserved.session_id in self._sessions:
                raise ValueError(f"session id {reserved.session_id!r} is already open")
            session_id, created_at = reserved.session_id, reserved.created_at
        else:
            session_id, created_at = f"sess_{uuid.uuid4().hex}", now_iso()
        return self._make(
            session_id,
            cwd,
            editor,
            restore=False,
            mcp_servers=mcp_servers,
            setup=not defer_setup,
            reserved=reserved,
            created_at=created_at,
        )

    async def _open_saved(
        self, session_id: str, cwd: str, editor: EditorPort, mcp_servers: Sequence[ServerConfig] | None = None
    ) -> tuple[Session, Iterator[ev.TurnEvent]]:
        existing = self._sessions.get(session_id)
        if existing is not None:
            # Already open here (the editor reopened the thread): keep the live kernel, whose state
            # is richer than its snapshot, and bind the session to the asking editor connection.
            existing.editor = editor
            configure_mcp(existing, mcp_servers, start=False)
            return existing, self.store.iter_events(session_id)
        if not self.store.exists(session_id):
            raise SessionNotFound(session_id)
        if cwd and not Path(resolve_cwd(cwd)).is_dir():
            # As session/new and session/resume: a kernel cannot start in a directory that is not there.
            raise ValueError(f"session cwd {cwd!r} is not an existing directory")
        await self.check_kernel_backend()
        try:
            loaded = self.store.load(session_id, events=False)  # the replay streams them (iter_events)
        except TranscriptDamaged:
            raise  # on disk but damaged: say so and where, not "unknown session"
        except ValueError as exc:
            raise SessionNotFound(session_id) from exc
        from agent_core.history.ownership import acquire_when_owner_gone

        # Waits out a killed owner's lock that one of its half-started children still holds.
        owner = await acquire_when_owner_gone(self.store.session_dir(session_id), session_id)
        # The editor's cwd is authoritative for where the kernel runs now; the transcript keeps its own.
        session = self._make(
            session_id,
            resolve_cwd(cwd or loaded.cwd),
            editor,
            restore=True,
            locked=owner,
            mcp_servers=mcp_servers or (),
            created_at=loaded.created_at,
            messages=loaded.messages,
            title=loaded.title,
            config=loaded.config,
            last_prompt_tokens=loaded.last_prompt_tokens,
        )
        session.repair_after_load()
        return session, self.store.iter_events(session_id, loaded.lines)

    async def load_session(
        self, session_id: str, cwd: str, editor: EditorPort, mcp_servers: Sequence[ServerConfig] | None = None
    ) -> tuple[Session, Iterator[ev.TurnEvent]]:
        """Reopen a saved session; returns the events to replay, in order, read from the transcript as
        they are taken (never all in memory at once). The kernel snapshot is restored."""
        session, events = await self._open_saved(session_id, cwd, editor, mcp_servers)
        await self._await_kernel(session)
        return session, events

    async def resume_session(
        self, session_id: str, cwd: str, editor: EditorPort, mcp_servers: Sequence[ServerConfig] | None = None
    ) -> Session:
        """Reopen a saved session without replay."""
        session, _ = await self._open_saved(session_id, cwd, editor, mcp_servers)
        return session

    async def fork_session(
        self,
        source: Session,
        editor: EditorPort,
        *,
        turns: int | None = None,
        cwd: str | None = None,
        mcp_servers: Sequence[ServerConfig] = (),
    ) -> tuple[Session, str]:
        """A new session from `source` as it is now, or as it was before its `turns`-th last prompt:
        transcript, local harness, goal and kernel state (agent_core/history/fork.py); opened like a loaded
        session. Returns it and a line saying which kernel state it got. `ForkError` / `RewindError`
        (ValueErrors) when it cannot be made."""
        return await self._fork(source, resolve_cwd(cwd or source.cwd), editor, turns, mcp_servers)

    async def fork_saved_session(
        self,
        source_id: str,
        editor: EditorPort,
        *,
        turns: int | None = None,
        cwd: str | None = None,
        mcp_servers: Sequence[ServerConfig] = (),
    ) -> tuple[Session, str]:
        """`fork_session` from a session that is not open in this process, read from disk without
        its owner lock: another process (an editor's second server) may have it open. Its kernel
        state is its last snapshot (or the checkpoint of the prompt it forks before)."""
        from agent_core.history.fork import SavedSession

        if not self.store.exists(source_id):
            raise SessionNotFound(source_id)
        source = SavedSession.read(self.store, source_id)
        meta = self.store.read_meta(source_id) or {}
        return await self._fork(
            source, resolve_cwd(cwd or str(meta.get("cwd") or "")), editor, turns, mcp_servers
        )

    async def _fork(
        self,
        source: Session | SavedSession,
        where: str,
        editor: EditorPort,
        turns: int | None,
        mcp_servers: Sequence[ServerConfig],
    ) -> tuple[Session, str]:
        """Write the fork's session dir from `source` (open here, or read from disk) and open it."""
        from agent_core.history.fork import fork_point, prepare_fork

        if not where or not Path(where).is_dir():
            raise ValueError(f"session cwd {where!r} is not an existing directory")
        await self.check_kernel_backend()
        point = fork_point(source, turns)
        new_id = f"sess_{uuid.uuid4().hex}"
        note = await prepare_fork(source, new_id, where, point)
        session, _ = await self._open_saved(new_id, where, editor, mcp_servers)
        return session, note

    async def _await_kernel(self, session: Session) -> None:
        try:
            await session.kernel()
        except Exception as exc:
            # The session is still usable: the failure is reported on the first cell.
            log.warning("kernel for session %s did not start: %s", session.id, exc)

    def list_sessions(self, cwd: str | None, cursor: str | None = None, limit: int = 50) -> SessionPage:
        return self.store.list(cwd, cursor, limit)

    def get_session(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def session_exists(self, session_id: str) -> bool:
        return self.store.exists(session_id)

    async def release_kernel(self, session: Session, snapshot_timeout: float = 10.0) -> bool:
        """Stop an open session's kernel to free it (final snapshot first); the session stays open and
        its next cell, or a `session/load`, starts a kernel that restores that snapshot (as for any
        loaded session). True when a kernel was stopped."""
        factory = self._kernel_factory(restore=True)
        return await session.kernel_handle.release(snapshot_timeout, restart=lambda: factory(session))

    async def close_session(self, session_id: str) -> None:
        """Cancel, snapshot and free the kernel; the transcript stays on disk. Idempotent."""
        session = self._sessions.pop(session_id, None)
        self._setup_pending.discard(session_id)  # closed before its deferred setup: none now
        if session is not None:
            await session.close()

    async def delete_session(self, session_id: str) -> DeletionNotice | None:
        """Close and remove from disk; idempotent. `SessionInUse` when another process has it open.

        Returns what the reply should say about the session's local harness entries (listed, and
        saved under `<home>/harness/deleted-sessions/` for `harness import`), or None if it had none.
        """
        from agent_core.history.ownership import SessionOwnerLock
        from agent_core.trust.promotion import deletion_notice  # trust

        await self.close_session(session_id)
        try:
            directory = self.store.session_dir(session_id)
        except ValueError:
            return None  # not a valid id: nothing of it can exist
        if not directory.is_dir():
            return None
        owner = SessionOwnerLock.acquire(directory, session_id)  # refuses a session open elsewhere
        notice = None
        try:
            # trust: the local entries go with the session; list and save them first.
            from harness_store import HarnessStore, local_root

            local = local_root(self.config.home, session_id)
            if local.is_dir():
                notice = deletion_notice(
                    HarnessStore(local), session_id, self.config.home / "harness" / "deleted-sessions"
                )
            self.store.delete(session_id)
        finally:
            owner.release()
        return notice


if TYPE_CHECKING:
    from agent_core.subagents.session_port import SubagentAgent

    def _the_hub_sees_an_agent(agent: Agent) -> SubagentAgent:
        """For mypy only: an `Agent` is what the subagent hub asks of its owner (it cannot import it)."""
        return agent
