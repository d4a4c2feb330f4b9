"""The ACP agent methods: initialize and the session/* family, on top of agent_core's `Agent`.

The agent (and with it openai, jupyter_client, the kernel pool) is built in the background at
spawn; `initialize` never waits for it, session methods do.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from acp_server.commands import slash_commands
from acp_server.harness import events as harness_events
from acp_server.ports import OpenSession, SessionBound, SessionReplayed
from acp_server.protocol import frames, wire
from acp_server.protocol.capabilities import ClientCapabilities
from acp_server.protocol.client_quirks import titles_edit_cards_by_path
from acp_server.protocol.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, AcpError
from acp_server.protocol.initialize import SETUP_METHOD_ID, initialize_answer
from acp_server.protocol.params import (
    AuthenticateParams,
    InitializeParams,
    NewSessionParams,
    read_authenticate,
    read_initialize,
    read_new_session,
)
from acp_server.protocol.registry import MethodRegistry, RequestContext
from acp_server.protocol.transport import Connection
from acp_server.sessions import outside_turn
from acp_server.sessions.config_options import config_options, kernel_meta, modes_state, session_setup
from acp_server.sessions.editor import JsonRpcEditor
from acp_server.sessions.ids import check_session_id
from acp_server.sessions.quiescence_file import write_ended
from acp_server.turn import subagent_cards
from acp_server.turn.presenter import TurnPresenter
from acp_server.turn.session_prompt import register_prompt
from agent_core.bus import EventBus
from host_base.process_identity import start_time

if TYPE_CHECKING:
    # Typing only: agent_core and the wire models are imported off the startup path.
    from acp.schema import (
        CancelNotification,
        CloseSessionRequest,
        DeleteSessionRequest,
        ForkSessionRequest,
        ListSessionsRequest,
        LoadSessionRequest,
        ResumeSessionRequest,
        SetSessionConfigOptionBooleanRequest,
        SetSessionConfigOptionSelectRequest,
        SetSessionModeRequest,
    )

    from acp_server.process.early_initialize import EarlySession
    from acp_server.v2.dialect import V2Dialect
    from agent_core.agent import Agent
    from agent_core.config.loader import AgentConfig
    from agent_core.errors import KernelBackendUnavailable, SessionInUse
    from agent_core.fresh_session import FreshSession
    from agent_core.history.transcript import SessionPage
    from agent_core.mcp import ServerConfig
    from agent_core.refinement.surface import HarnessSurface
    from agent_core.session import Session
    from agent_core.turn.system_prompt import ClientSystemPrompt

log = logging.getLogger(__name__)

JsonObject = dict[str, object]

SHUTDOWN_TIMEOUT_SECONDS = 30.0
WARM_UP_DELAY = 0.15
# Without a session answer this long after the agent is built, the background work starts anyway.
BACKGROUND_DELAY = 1.0
EXTENSION_PREFIXES = ("_harness/", "_session/")


class AcpServer:
    """Server state shared by the handlers: client capabilities, the agent, open sessions."""

    def __init__(
        self,
        registry: MethodRegistry,
        *,
        agent_factory: Callable[[AgentConfig], Agent] | None = None,
        agent_prepare: Callable[[], None] | None = None,
    ) -> None:
        self.registry = registry
        self._agent_factory = agent_factory
        self._agent_prepare = agent_prepare
        self.client = ClientCapabilities()
        self.connection: Connection | None = None
        self.protocol = 1  # 2: the connection speaks the ACP v2 draft (acp_server/v2)
        self.sessions: dict[str, OpenSession] = {}
        self._agent: Agent | None = None
        self._agent_error: str | None = None
        self._config_error: frames.Frame | None = None
        self._agent_ready = anyio.Event()
        self._warm = anyio.Event()
        self._background = anyio.Event()
        self._background_started = False
        self.extension_notifications: list[str] = []
        # Sessions an early session/new answered whose creation then failed: their error, for each use.
        self._failed_sessions: dict[str, AcpError] = {}
        # The seam for extensions that keep per-session state (agent_core.bus): `SessionBound` for
        # every session bound to this connection (new/load/resume) once its setup is done
        # (`OpenSession.set_up`; the harness events are subscribed there too), `SessionReplayed`
        # after a session/load replay, before the response (subagent cards whose child changed
        # state while no one recorded it, e.g. interrupted by a restart).
        self.bus = EventBus("the ACP server")
        self._register()

    # ------------------------------------------------------------ agent lifecycle

    def warm_up(self) -> None:
        """Start the heavy imports (the agent, then the wire models) now; idempotent.

        Triggered right after the `initialize` answer is written (or `WARM_UP_DELAY` after spawn if
        the client is slow to ask): imports hold the GIL, so running them during `initialize` would
        slow the one answer an editor waits on at startup.
        """
        self._warm.set()

    async def warm_up_soon(self) -> None:
        with anyio.move_on_after(WARM_UP_DELAY):
            await self._warm.wait()
        self.warm_up()

    async def start_agent(self) -> None:
        """Import agent_core's heavy half off the loop and build the Agent; the rest of the
        background work (`start_background`) waits for the first session answer."""
        await self._warm.wait()
        try:
            # Abandoned on cancel: an end of input during the import must not wait for it (shutdown).
            agent_cls, load_config = await anyio.to_thread.run_sync(
                _import_agent, self._agent_prepare, abandon_on_cancel=True
            )
            try:
                config = load_config()
            except ValueError as exc:  # ConfigError, ConfigFileError, a backend combination: the user's
                self._config_error = _config_error(exc)
                raise
            self._agent = self._agent_factory(config) if self._agent_factory else agent_cls(config)
            # No kernel starts before the first session answer is written (start_background).
            self._agent.kernel_gate = asyncio.Event()
            log.info("agent ready %.0f ms after spawn", _since_spawn_ms())
        except Exception as exc:
            if self._config_error is not None:
                log.error("%s", self._config_error["message"])
            else:
                log.exception("the agent failed to start")
            self._agent_error = f"the agent failed to start: {type(exc).__name__}: {exc}"
        finally:
            self._agent_ready.set()
        # A client that opens no session soon still gets its kernels and wire models warmed.
        with anyio.move_on_after(BACKGROUND_DELAY):
            await self._background.wait()
        await self.start_background()

    async def start_background(self) -> None:
        """After the first session/new|load|resume answer is written (idempotent): the wire models'
        import, the session kernels' start and the warm pool. Before it, each would compete for
        the cores (2 on the machines measured) with the answer the editor is waiting for."""
        if self._background_started:
            return
        self._background_started = True
        self._background.set()
        wire.start_background_import()
        agent = self._agent
        if agent is None:
            return
        try:
            # jupyter_client & co. in a worker thread, so the loop keeps serving meanwhile: the pool's
            # module, since kernel_bridge's own __init__ imports its parts lazily (importing the package
            # alone left jupyter_client to `agent.start`, on the loop: a 0.3-0.8 s stall).
            await anyio.to_thread.run_sync(importlib.import_module, "kernel_bridge.pool")
        except Exception:
            log.exception("importing kernel_bridge failed")  # each kernel start reports it again
        if agent.kernel_gate is not None:
            agent.kernel_gate.set()
        await agent.start()

    async def agent(self) -> Agent:
        await self._agent_ready.wait()
        if self._agent is None and self._config_error is not None:
            raise AcpError.from_error(self._config_error)
        if self._agent is None:
            raise AcpError(INTERNAL_ERROR, self._agent_error or "the agent is not available")
        return self._agent

    async def stop_turns(self) -> None:
        """EOF, step 1: resolve permission prompts and cancel running turns so prompts can answer."""
        for session_id in list(self.sessions):
            with anyio.move_on_after(5):
                await self.cancel_session(session_id)

    async def shutdown(self) -> None:
        """EOF, step 2: final snapshots and kernels down (agent.aclose)."""
        if not self._agent_ready.is_set() and not self.sessions:
            # The input ended before anything needed the agent (a launcher probing the command,
            # stdin at /dev/null): there is nothing to close, so exit without waiting for its import.
            return
        with anyio.move_on_after(SHUTDOWN_TIMEOUT_SECONDS) as scope:
            await self._agent_ready.wait()
            if self._agent is not None:
                await self._agent.aclose()
        if scope.cancelled_caught:
            log.error("shutdown did not finish within %.0f s; exiting anyway", SHUTDOWN_TIMEOUT_SECONDS)
        # The sessions still bound close with the process: their unbind work runs (e.g. the
        # quiescence file each keeps for other processes says the session ended).
        for opened in list(self.sessions.values()):
            try:
                _unbind(opened)
            except Exception:
                log.exception("unbinding %s at shutdown failed", opened.session.id)

    # ------------------------------------------------------------ plumbing

    def _conn(self) -> Connection:
        assert self.connection is not None
        return self.connection

    async def send_update(self, session_id: str, update: dict[str, object]) -> None:
        await self._conn().notify("session/update", {"sessionId": session_id, "update": update})

    async def notify(self, method: str, params: dict[str, object]) -> None:
        """An agent->client notification (an extension's, e.g. `_harness/quiescence`)."""
        await self._conn().notify(method, params)

    def _bind(self, session: Session, editor: JsonRpcEditor, *, set_up: bool = True) -> OpenSession:
        """Bind `session` to this connection. `set_up=False` (session/new) leaves the rest of its setup
        (refinement and its imports, the harness events) to `OpenSession.set_up()`, which the
        handler runs right after its answer is written, or the first use of the session runs."""
        session_id = session.id

        async def send(update: JsonObject) -> None:
            await self.send_update(session_id, update)

        presenter = TurnPresenter(
            send,
            cwd=str(session.cwd),
            terminal_output=self.client.terminal_output,
            notices=self.client.notices,  # clients: ACP v1 notice / compaction updates when advertised
            compaction=self.client.compaction,
            plan_by_id=self.client.plan,  # unstable `plan_update` only to a client that advertises `plan`
            path_titles=titles_edit_cards_by_path(self.client.client_name),
            subagent_updates=self.client.subagents,  # unstable `subagent_update`, replayed too
        )
        editor.session_id = session_id
        editor.presenter = presenter

        def build_harness() -> HarnessSurface:
            from agent_core.refinement.attach import harness_of

            if self._agent is not None:
                self._agent.finish_setup(session)  # on_session, when session/new deferred it
            return harness_of(session)

        def after_set_up(opened: OpenSession) -> None:
            # One subscription to the session's harness events: cards, review prompts, quiescence.
            harness_events.subscribe(self, opened)
            # `SessionBound` subscribers read what the session's setup attached (its subagent hub).
            self.bus.emit(SessionBound(opened))

        opened = OpenSession(session, editor, presenter, build_harness, after_set_up)
        self.sessions[session_id] = opened
        outside_turn.subscribe(opened)  # notify_user / compaction outside a turn
        if set_up:
            opened.set_up()
        return opened

    def _new_editor(self) -> JsonRpcEditor:
        # The presenter is attached in _bind once the session (and its id) exists.
        return JsonRpcEditor(self._conn(), self.client)

    def _advertise_commands(self, ctx: RequestContext, session_id: str) -> None:
        async def advertise() -> None:
            opened = self.sessions.get(session_id)
            # Off the loop: listing the skills reads the repository's skill folders.
            extra = (
                await anyio.to_thread.run_sync(slash_commands.skill_commands, opened.session)
                if opened is not None
                else []
            )
            if opened is not None:
                opened.advertised_skills = tuple(c.name for c in extra)
            await self.send_update(session_id, slash_commands.available_commands_update(extra))

        ctx.after_response.append(advertise)

    async def refresh_commands(self, opened: OpenSession) -> None:
        """Re-advertise the commands when the session's user skills changed since the last time."""
        extra = await anyio.to_thread.run_sync(slash_commands.skill_commands, opened.session)
        names = tuple(c.name for c in extra)
        if names != opened.advertised_skills:
            opened.advertised_skills = names
            await self.send_update(opened.session.id, slash_commands.available_commands_update(extra))

    async def open_session(self, session_id: str) -> OpenSession:
        """An open session, or one resumed from disk; -32002 when it exists nowhere."""
        opened = self.sessions.get(session_id)
        if opened is not None:
            opened.set_up()  # a session/new whose deferred setup has not run yet: now, before its use
            return opened
        failed = self._failed_sessions.get(session_id)
        if failed is not None:  # answered early (adopt_early_session), then its creation failed
            raise AcpError(failed.code, failed.message, failed.data)
        agent = await self.agent()
        check_session_id(agent, session_id)
        if not agent.session_exists(session_id):
            raise AcpError.session_not_found(session_id)
        cwd = await anyio.to_thread.run_sync(_stored_cwd, agent, session_id)
        return await self._resume(agent, session_id, cwd)

    async def _resume(
        self, agent: Agent, session_id: str, cwd: str, servers: Sequence[ServerConfig] | None = None
    ) -> OpenSession:
        from agent_core import KernelBackendUnavailable, SessionInUse, SessionNotFound

        editor = self._new_editor()
        try:
            session = await agent.resume_session(session_id, cwd, editor, servers)
        except SessionNotFound:
            raise AcpError.session_not_found(session_id) from None
        except SessionInUse as exc:
            raise _in_use_error(exc) from None
        except KernelBackendUnavailable as exc:
            raise _backend_error(exc) from None
        except ValueError as exc:
            raise AcpError.invalid_params(f"session {session_id}: {exc}") from None
        return self._bind(session, editor)

    # ------------------------------------------------------------ handlers

    def _register(self) -> None:
        r = self.registry
        # Read by hand (params.py): initialize and session/new race the background import of the
        # wire models at startup (the 400 ms spawn->session/new budget).
        r.request("initialize", reader=read_initialize)(self.initialize)
        r.request("authenticate", reader=read_authenticate)(self.authenticate)
        r.request("auth/login", reader=read_authenticate)(self.login)
        r.request("session/new", reader=read_new_session)(self.new_session)
        r.request("session/load", params_model="LoadSessionRequest")(self.load_session)
        r.request("session/resume", params_model="ResumeSessionRequest")(self.resume_session)
        r.request("session/list", params_model="ListSessionsRequest")(self.list_sessions)
        r.request("session/fork", params_model="ForkSessionRequest")(self.fork_session)
        r.request("session/close", params_model="CloseSessionRequest")(self.close_session)
        r.request("session/delete", params_model="DeleteSessionRequest")(self.delete_session)
        r.request("session/set_mode", params_model="SetSessionModeRequest")(self.set_mode)
        r.request("session/set_config_option", params_model=_config_option_model)(self.set_config_option)
        r.notification("session/cancel", params_model="CancelNotification")(self.cancel)
        register_prompt(self)

    async def initialize(self, ctx: RequestContext, req: InitializeParams) -> JsonObject:
        self.client = ClientCapabilities.from_initialize(req)

        async def warm_up() -> None:
            self.warm_up()

        ctx.after_response.append(warm_up)
        self._speak(req.protocol_version)
        return initialize_answer(*self.advertised(), req.protocol_version, req.client_capabilities)

    def _speak(self, protocol_version: int) -> None:
        """The protocol this connection speaks from now: v1, or the v2 draft (acp_server/v2) when
        `CONTINUAL_ACP_PROTOCOL=2` and the client asked for it."""
        from acp_server.v2.switch import speaks_v2

        self.protocol = 2 if speaks_v2(protocol_version) else 1
        if self.connection is not None:
            self.connection.dialect = None
            if self.protocol == 2:
                from acp_server.v2.dialect import V2Dialect

                self.connection.dialect = V2Dialect(self.connection.notify_as_is)

    def use_connection(self, connection: Connection) -> None:
        """The connection this server answers on (in the dialect an early `initialize` chose)."""
        self.connection = connection
        self._speak(self.protocol)

    def v2_dialect(self) -> V2Dialect | None:
        """The connection's v2 state, when it speaks the v2 draft."""
        if self.protocol != 2 or self.connection is None:
            return None  # v1: nothing of acp_server/v2 is imported
        from acp_server.v2.dialect import V2Dialect

        dialect = self.connection.dialect
        return dialect if isinstance(dialect, V2Dialect) else None

    def initialized_early(self, params: JsonObject) -> None:
        """The first `initialize` was answered before this server existed (early_initialize.py):
        take the client's capabilities from its params and start the heavy imports now."""
        from acp_server.protocol.params import initialize_params

        req = initialize_params(params)
        self.client = ClientCapabilities.from_initialize(req)
        self._speak(req.protocol_version)
        self.warm_up()

    async def login(self, ctx: RequestContext, req: AuthenticateParams) -> JsonObject:
        """`auth/login`, the ACP v2 draft's `authenticate`: served on a v2 connection only."""
        if self.protocol != 2:
            raise AcpError(
                METHOD_NOT_FOUND, "Method not found: auth/login (ACP v2; this connection speaks v1)"
            )
        return await self.authenticate(ctx, req)

    async def authenticate(self, ctx: RequestContext, req: AuthenticateParams) -> JsonObject:
        """The setup method: `{}` once a model is set up (at once when the environment or the config
        file already gave one), else -32000 naming `continual-acp setup`."""
        if req.method_id != SETUP_METHOD_ID:
            raise AcpError.invalid_params(
                f"authenticate: unknown methodId {req.method_id!r}; this agent offers {SETUP_METHOD_ID!r}",
                [frames.param_error(["methodId"], f"must be {SETUP_METHOD_ID!r}", "literal_error")],
            )
        await self._require_model_setup(await self.agent())
        return {}

    async def _require_model_setup(self, agent: Agent) -> None:
        """Sessions need a model: when the agent has none complete, the config is read again (the
        user may have run `continual-acp setup` since this server started) and adopted, or -32000."""
        if agent.config.model_setup_complete:
            return
        from agent_core import load_config
        from agent_core.config.loader import config_path

        path = str(config_path(os.environ))
        try:
            fresh = await anyio.to_thread.run_sync(load_config)
        except ValueError as exc:
            raise AcpError.from_error(
                frames.auth_required_error(
                    f"Authentication required: the config is not valid ({exc}). Run `continual-acp setup` "
                    "in a terminal to write a working one.",
                    SETUP_METHOD_ID,
                    path,
                )
            ) from None
        agent.config.adopt_model_settings(fresh)
        if agent.config.model_setup_complete:
            log.info("model settings taken from %s", path)
            return
        raise AcpError.from_error(
            frames.auth_required_error(
                "Authentication required: no model is set up yet. Run `continual-acp setup` in a terminal "
                f"(it asks for the endpoint, key and model and writes {path}), or pass CONTINUAL_ACP_MODEL "
                "and OPENAI_API_KEY (or OPENAI_BASE_URL for a local server) in the editor's env for this agent.",
                SETUP_METHOD_ID,
                path,
            )
        )

    def advertised(self) -> tuple[list[str], list[str]]:
        """The extension `(methods, notifications)` the `initialize` answer lists."""
        methods = [name for name in self.registry.names() if name.startswith(EXTENSION_PREFIXES)]
        return methods, list(self.extension_notifications)

    async def new_session(
        self, ctx: RequestContext, req: NewSessionParams, *, reserved: FreshSession | None = None
    ) -> JsonObject:
        """`session/new`; `reserved`: the session an early answer gave (adopt_early_session)."""
        from agent_core import KernelBackendUnavailable

        cwd = _absolute_cwd(req.cwd)
        servers = _mcp_servers("session/new", req.mcp_servers)
        instructions = _system_prompt(ctx, "session/new")
        agent = await self.agent()
        await self._require_model_setup(agent)
        editor = self._new_editor()
        started = time.monotonic()
        try:
            session = await agent.new_session(cwd, editor, servers, defer_setup=True, reserved=reserved)
        except ValueError as exc:  # e.g. a cwd that is not a directory
            raise AcpError.invalid_params(
                f"session/new: {exc}", [frames.param_error(["cwd"], str(exc), "value_error")]
            ) from None
        except OSError as exc:
            raise _data_dir_error("session/new", agent, exc) from None
        except KernelBackendUnavailable as exc:
            raise _backend_error(exc) from None
        log.info("agent.new_session took %.0f ms", (time.monotonic() - started) * 1000)
        opened = self._bind(session, editor, set_up=False)
        opened.session.client_system_prompt = instructions

        async def set_up() -> None:
            # After the answer. The refinement imports (0.1-0.6 s of pydantic models) and the project
            # lookup (a walk up the workspace's path) go to a worker thread first: on the loop they
            # stalled every session. A request that needs the harness before this ends sets it up
            # itself (`OpenSession.harness`), so none finds the session half set up.
            await anyio.to_thread.run_sync(_prepare_harness, session)
            if self.sessions.get(session.id) is opened:
                opened.set_up()

        ctx.after_response.append(set_up)
        self._advertise_commands(ctx, session.id)
        ctx.after_response.append(_start_mcp(session))
        ctx.after_response.append(self.start_background)
        return frames.new_session_response(
            session.id, modes_state(opened.session), config_options(opened.session), _kernel_meta(agent)
        )

    async def adopt_early_session(self, early: EarlySession) -> list[Callable[[], Awaitable[None]]]:
        """Open the session an early `session/new` answer gave (acp_server/process/early_session.py; its files
        and lock already on disk) through the same handler; returns its after-response steps for the
        caller to run. Awaited before any other request is read, so none finds it half open. A
        failure is kept: every later use of the id here answers it (`open_session`), and the lock is
        let go (the session stays on disk, loadable once the cause is fixed)."""
        from acp_server.protocol.params import read_new_session

        ctx = RequestContext(self._conn(), "session/new", early.request_id, False)
        ctx.extras["params"] = early.params
        try:
            req = await read_new_session(early.params, "session/new")
            result = await self.new_session(ctx, req, reserved=early.fresh)
        except Exception as exc:
            if self._agent is None or self._agent.get_session(early.fresh.session_id) is None:
                early.fresh.release()  # not taken over (once it is, the session's close releases it)
            message = exc.message if isinstance(exc, AcpError) else f"{type(exc).__name__}: {exc}"
            data = exc.data if isinstance(exc, AcpError) else None
            self._failed_sessions[early.fresh.session_id] = AcpError(
                exc.code if isinstance(exc, AcpError) else INTERNAL_ERROR,
                f"session {early.fresh.session_id} could not be set up: {message}",
                data,
            )
            log.error("the session answered early could not be set up: %s", message)
            return []
        if result != early.result:
            log.error("the early session/new answered %r, the server built %r", early.result, result)
        return ctx.after_response

    async def load_session(self, ctx: RequestContext, req: LoadSessionRequest) -> JsonObject:
        from agent_core import KernelBackendUnavailable, SessionInUse, SessionNotFound

        cwd = _absolute_cwd(req.cwd)
        servers = _mcp_servers("session/load", req.mcp_servers)
        instructions = _system_prompt(ctx, "session/load")
        agent = await self.agent()
        check_session_id(agent, req.session_id)
        await self._require_model_setup(agent)
        await self._forget(req.session_id)
        editor = self._new_editor()
        try:
            session, events = await agent.load_session(req.session_id, cwd, editor, servers)
        except SessionNotFound:
            raise AcpError.session_not_found(req.session_id) from None
        except SessionInUse as exc:
            raise _in_use_error(exc) from None
        except KernelBackendUnavailable as exc:
            raise _backend_error(exc) from None
        except ValueError as exc:
            raise AcpError.invalid_params(f"session/load: {exc}") from None
        opened = self._bind(session, editor)
        session.client_system_prompt = instructions
        # The whole transcript goes out before the response: a client shows the history as soon as load answers.
        opened.presenter.attach(None, replay=True)
        for event in events:
            await opened.presenter.present(event)
        await self._tell_interrupted_loop(opened)
        await self.bus.publish(SessionReplayed(opened))
        await opened.presenter.close()
        self._advertise_commands(ctx, session.id)
        ctx.after_response.append(_start_mcp(session))
        ctx.after_response.append(self.start_background)
        return session_setup(session, _kernel_meta(agent))

    async def _tell_interrupted_loop(self, opened: OpenSession) -> None:
        """After a replay: an autonomous loop cut off by a server restart is not resumed by itself;
        the user is told so, once (the message is recorded, so later loads show it in place)."""
        from agent_core import MessageChunk

        autonomy = opened.session.autonomy
        notice = autonomy.take_interrupted_notice() if autonomy is not None else None
        if notice:
            event = MessageChunk(f"\n\n{notice}\n", f"msg_loop_{uuid.uuid4().hex[:12]}")
            opened.session.record_event(event)
            await opened.presenter.present(event)

    async def resume_session(self, ctx: RequestContext, req: ResumeSessionRequest) -> JsonObject:
        cwd = _absolute_cwd(req.cwd)
        if not os.path.isdir(cwd):
            # Like session/new: a kernel cannot start in a directory that does not exist.
            raise AcpError.invalid_params(
                f"session/resume: cwd {cwd!r} is not an existing directory",
                [frames.param_error(["cwd"], "not an existing directory", "value_error")],
            )
        servers = _mcp_servers("session/resume", req.mcp_servers)
        instructions = _system_prompt(ctx, "session/resume")
        agent = await self.agent()
        check_session_id(agent, req.session_id)
        await self._require_model_setup(agent)
        opened = self.sessions.get(req.session_id)
        if opened is not None:
            from agent_core.mcp import configure_mcp

            opened.set_up()
            configure_mcp(opened.session, servers, start=False)
        else:
            opened = await self._resume(agent, req.session_id, cwd, servers)
        opened.session.client_system_prompt = instructions
        self._advertise_commands(ctx, req.session_id)
        ctx.after_response.append(_start_mcp(opened.session))
        ctx.after_response.append(self.start_background)
        return session_setup(opened.session, _kernel_meta(agent))

    async def fork_into(
        self,
        source: OpenSession,
        *,
        turns: int | None = None,
        cwd: str | None = None,
        servers: list[ServerConfig] | None = None,
    ) -> tuple[OpenSession, str]:
        """Fork `source` (now, or before its `turns`-th last prompt) into a new session bound to this
        connection; the new session and which kernel state it got. AcpError -32602 when it cannot be."""
        from agent_core import KernelBackendUnavailable, SessionInUse

        agent = await self.agent()
        editor = self._new_editor()
        try:
            session, note = await agent.fork_session(
                source.session, editor, turns=turns, cwd=cwd, mcp_servers=servers or ()
            )
        except SessionInUse as exc:
            raise _in_use_error(exc) from None
        except KernelBackendUnavailable as exc:
            raise _backend_error(exc) from None
        except ValueError as exc:  # ForkError, RewindError, a cwd that is not a directory
            raise AcpError.invalid_params(f"session/fork: {exc}") from None
        return self._bind(session, editor), note

    async def fork_saved_into(
        self,
        agent: Agent,
        source_id: str,
        *,
        turns: int | None,
        cwd: str,
        servers: list[ServerConfig] | None,
    ) -> tuple[OpenSession, str]:
        """`fork_into` for a source this process does not have open (read from disk, no lock)."""
        from agent_core import KernelBackendUnavailable, SessionNotFound

        check_session_id(agent, source_id)
        editor = self._new_editor()
        try:
            session, note = await agent.fork_saved_session(
                source_id, editor, turns=turns, cwd=cwd, mcp_servers=servers or ()
            )
        except SessionNotFound:
            raise AcpError.session_not_found(source_id) from None
        except KernelBackendUnavailable as exc:
            raise _backend_error(exc) from None
        except ValueError as exc:  # ForkError, RewindError, a cwd that is not a directory
            raise AcpError.invalid_params(f"session/fork: {exc}") from None
        return self._bind(session, editor), note

    async def fork_session(self, ctx: RequestContext, req: ForkSessionRequest) -> JsonObject:
        cwd = _absolute_cwd(req.cwd)
        servers = _mcp_servers("session/fork", req.mcp_servers)
        instructions = _system_prompt(ctx, "session/fork")
        agent = await self.agent()
        await self._require_model_setup(agent)
        meta = req.field_meta.get(frames.META_KEY) if isinstance(req.field_meta, dict) else None
        turns = meta.get("beforePrompt") if isinstance(meta, dict) else None
        if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
            raise AcpError.invalid_params(
                f"session/fork: _meta.{frames.META_KEY}.beforePrompt: must be an integer >= 1 (n-th last prompt)"
            )
        if req.session_id in self.sessions or agent.get_session(req.session_id) is not None:
            source = await self.open_session(req.session_id)
            opened, note = await self.fork_into(source, turns=turns, cwd=cwd, servers=servers)
        else:
            # Not open here: read from disk without its owner lock, whichever process has it open.
            opened, note = await self.fork_saved_into(
                agent, req.session_id, turns=turns, cwd=cwd, servers=servers
            )
        opened.session.client_system_prompt = instructions
        self._advertise_commands(ctx, opened.session.id)
        ctx.after_response.append(_start_mcp(opened.session))
        return frames.fork_session_response(
            opened.session.id,
            modes_state(opened.session),
            config_options(opened.session),
            forked_from=req.session_id,
            before_prompt=turns,
            kernel_note=note,
        )

    async def list_sessions(self, ctx: RequestContext, req: ListSessionsRequest) -> JsonObject:
        agent = await self.agent()
        cwd = req.cwd
        if cwd is not None and not os.path.isabs(cwd):
            raise AcpError.invalid_params(f"session/list: cwd must be an absolute path, got {cwd!r}")

        def page() -> SessionPage:
            return agent.list_sessions(cwd, req.cursor)

        try:
            # A small store is listed inline: the worker-thread hop would cost more than the listing
            # (the trivial-request round trip target is 200 µs). Big stores go to a thread.
            if _few_sessions(agent):
                result = page()
            else:
                result = await anyio.to_thread.run_sync(page)
        except ValueError as exc:
            raise AcpError.invalid_params(f"session/list: {exc}") from None
        sessions = []
        for s in result.sessions:
            entry = frames.session_list_entry(s.session_id, str(s.cwd), s.title, s.updated_at)
            link = subagent_cards.list_meta(agent, s.session_id)  # a child session names its parent
            if link is not None:
                entry["_meta"] = link
            sessions.append(entry)
        return frames.list_sessions_response(sessions, result.next_cursor)

    async def _forget(self, session_id: str) -> OpenSession | None:
        opened = self.sessions.pop(session_id, None)
        if opened is not None:
            opened.cancel_generation += 1
            opened.editor.cancel_pending_permissions()
            _unbind(opened)
            await opened.session.cancel()
        return opened

    async def close_session(self, ctx: RequestContext, req: CloseSessionRequest) -> JsonObject:
        agent = await self.agent()
        check_session_id(agent, req.session_id)
        opened = await self._forget(req.session_id)
        if opened is None and not agent.session_exists(req.session_id):
            raise AcpError.session_not_found(req.session_id)
        if opened is not None:
            await agent.close_session(req.session_id)
        return frames.empty_response()

    async def delete_session(self, ctx: RequestContext, req: DeleteSessionRequest) -> JsonObject:
        agent = await self.agent()
        from agent_core import SessionInUse

        check_session_id(agent, req.session_id)
        await self._forget(req.session_id)
        try:
            notice = await agent.delete_session(req.session_id)  # idempotent: unknown ids succeed
        except SessionInUse as exc:
            raise _in_use_error(exc) from None
        if notice is None:
            return frames.empty_response()
        # trust: the reply lists the local entries deleted with the session and how to keep them.
        return {
            "_meta": {
                "continual-acp": {
                    "localEntries": [{"kind": e.kind, "id": e.id, "title": e.title} for e in notice.entries],
                    "savedTo": str(notice.saved_to) if notice.saved_to else None,
                    "message": notice.text,
                }
            }
        }

    async def set_mode(self, ctx: RequestContext, req: SetSessionModeRequest) -> JsonObject:
        opened = await self.open_session(req.session_id)
        try:
            opened.session.set_mode(req.mode_id)
        except ValueError as exc:
            raise AcpError.invalid_params(f"session/set_mode: {exc}") from None
        session_id = req.session_id

        async def announce() -> None:
            await self.send_update(session_id, frames.config_option_update(config_options(opened.session)))

        ctx.after_response.append(announce)
        return frames.empty_response()

    async def set_config_option(
        self,
        ctx: RequestContext,
        req: SetSessionConfigOptionSelectRequest | SetSessionConfigOptionBooleanRequest,
    ) -> JsonObject:
        session_id, config_id, value = req.session_id, req.config_id, req.value
        opened = await self.open_session(session_id)
        advertised = [str(option["id"]) for option in config_options(opened.session)]
        if config_id not in advertised:
            raise AcpError.invalid_params(
                f"session/set_config_option: unknown config option {config_id!r}; options: {', '.join(advertised)}"
            )
        try:
            opened.session.set_config(config_id, value)  # "mode" too: set_mode is set_config("mode")
        except ValueError as exc:
            raise AcpError.invalid_params(f"session/set_config_option: {exc}") from None
        if config_id == "mode":

            async def announce_mode() -> None:
                await self.send_update(session_id, frames.current_mode_update(str(value)))

            ctx.after_response.append(announce_mode)
        return frames.config_options_response(config_options(opened.session))

    async def cancel(self, ctx: RequestContext, req: CancelNotification) -> None:
        await self.cancel_session(req.session_id)

    async def cancel_session(self, session_id: str) -> None:
        opened = self.sessions.get(session_id)
        if opened is None:
            return  # a notification: nothing to answer, nothing to cancel
        opened.cancel_generation += 1
        opened.cancel_work()
        opened.editor.cancel_pending_permissions()
        await opened.session.cancel()


def _backend_error(exc: KernelBackendUnavailable) -> AcpError:
    """-32011: the kernel backend cannot start kernels (a missing bwrap, interpreter, gateway)."""
    log.error("kernel backend %s unavailable: %s", exc.backend, exc.message)
    return AcpError.from_error(frames.kernel_backend_error(exc.message, exc.backend))


def _kernel_meta(agent: Agent) -> JsonObject | None:
    """The backend's guarantees for the result's `_meta`, or None before the kernel pool exists."""
    return kernel_meta(agent.kernel_guarantees())


def _in_use_error(exc: SessionInUse) -> AcpError:
    """The session is open in another continual-acp process (it holds the session's owner lock)."""
    return AcpError.from_error(frames.session_in_use_error(str(exc), exc.session_id, exc.pid))


def _data_dir_error(method: str, agent: Agent, exc: OSError) -> AcpError:
    """A data dir that cannot be created or written: say which, why, and what to do (one log line)."""
    home = str(getattr(getattr(agent, "config", None), "home", "") or "the data dir")
    why = exc.strerror or str(exc)
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != home else ""
    log.error("%s: the data dir %s is not usable: %s%s", method, home, why, where)
    return AcpError.from_error(
        frames.data_dir_error(
            f"{method}: the data dir {home} (CONTINUAL_ACP_HOME) cannot be created or written: {why}{where}. "
            "Set CONTINUAL_ACP_HOME (or `home` in config.toml) to a writable directory in the editor's "
            "agent settings and restart the agent; `continual-acp doctor` checks it.",
            home,
            why,
        )
    )


def _since_spawn_ms() -> float:
    """Milliseconds since this process started (for the startup log lines)."""
    started = start_time(os.getpid())
    if started is None:
        return float("nan")
    try:
        start_ticks = int(started)
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return (uptime - start_ticks / os.sysconf("SC_CLK_TCK")) * 1000
    except (OSError, ValueError, IndexError):
        return float("nan")


INLINE_LIST_LIMIT = 32


def _few_sessions(agent: Agent) -> bool:
    """True when the data dir holds at most INLINE_LIST_LIMIT sessions (cheap: one directory scan)."""
    try:
        root = os.path.join(str(agent.config.home), "sessions")
        with os.scandir(root) as entries:
            for count, _ in enumerate(entries, 1):
                if count > INLINE_LIST_LIMIT:
                    return False
    except FileNotFoundError:
        return True
    except (OSError, AttributeError):
        return False
    return True


def _system_prompt(ctx: RequestContext, method: str) -> ClientSystemPrompt | None:
    """The request's unstable `systemPrompt` (-32602 before anything is opened when it is bad)."""
    from acp_server.sessions.system_prompt_param import read_system_prompt

    return read_system_prompt(ctx.extras.get("params"), method)


def _config_error(exc: ValueError) -> frames.Frame:
    """The answer to every session request while the configuration is not valid (never defaults)."""
    return frames.config_error(
        f"the configuration is not valid: {exc}",
        str(getattr(exc, "key", "") or ""),
        str(getattr(exc, "source", "") or ""),
        getattr(exc, "line", None),
    )


def _import_agent(
    prepare: Callable[[], None] | None,
) -> tuple[type[Agent], Callable[[], AgentConfig]]:
    """Worker thread: the slow imports, so session/new does not pay them on the event loop."""
    from agent_core import Agent, load_config

    if prepare is not None:
        prepare()
    return Agent, load_config


def _config_option_model(params: JsonObject) -> str:
    """The `acp.schema` model of these set_config_option params: a wire union on `type`."""
    if params.get("type") == "boolean":
        return "SetSessionConfigOptionBooleanRequest"
    return "SetSessionConfigOptionSelectRequest"


def _mcp_servers(method: str, raw: object) -> list[ServerConfig]:
    """`mcpServers` (dicts, or the wire models of load/resume) as agent_core records; -32602 if malformed."""
    from agent_core.mcp import McpConfigError, parse_servers

    entries = raw if isinstance(raw, list | tuple) else []
    items = [
        s.model_dump(by_alias=True, exclude_none=True) if hasattr(s, "model_dump") else s for s in entries
    ]
    try:
        return list(parse_servers(items))
    except McpConfigError as exc:
        error = {"loc": list(exc.loc), "msg": str(exc), "type": "value_error"}
        raise AcpError.invalid_params(f"{method}: {exc}", [error]) from None


def _start_mcp(session: Session) -> Callable[[], Awaitable[None]]:
    """After the response: start the session's MCP servers (so they never delay the answer)."""

    async def start() -> None:
        registry = session.mcp
        if registry is not None:
            registry.start()

    return start


def _prepare_harness(session: Session) -> None:
    """What building a session's harness reads, done ahead in a worker thread: the imports of the
    agent's `on_session` (refinement, autonomous mode, the subagents' host calls) and the session's
    project store (cached on the session)."""
    for module in (
        "agent_core.refinement.attach",
        "agent_core.autonomy.controller",
        "agent_core.subagents.host_ops",
    ):
        importlib.import_module(module)
    _ = session.project_store


def _unbind(opened: OpenSession) -> None:
    """Run the unbind work of a session leaving this connection (session/close, delete, load over
    it, shutdown). One closed before its deferred setup ran has no quiescence publisher yet: its
    file still says it ended, as every closed session's does."""
    if opened.unsubscribe is not None:
        opened.unsubscribe()
    if not opened.is_set_up:
        directory = opened.session.session_dir
        if directory.is_dir():  # the data dir's, never the workspace's
            try:
                write_ended(directory, opened.session.id)
            except OSError as exc:
                log.warning("cannot write the quiescence file of %s: %s", opened.session.id, exc)


def _absolute_cwd(cwd: str) -> str:
    if not os.path.isabs(cwd):
        raise AcpError.invalid_params(
            f"cwd must be an absolute path, got {cwd!r}",
            [frames.param_error(["cwd"], "must be an absolute path", "value_error")],
        )
    return cwd


def _stored_cwd(agent: Agent, session_id: str) -> str:
    """The cwd a stored session was created in (a prompt for a session not open in this process)."""
    cursor: str | None = None
    while True:
        page = agent.list_sessions(None, cursor)
        for summary in page.sessions:
            if summary.session_id == session_id:
                return str(summary.cwd)
        cursor = page.next_cursor
        if not cursor:
            return os.getcwd()
