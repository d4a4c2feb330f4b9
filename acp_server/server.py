"""`continual-acp serve`: ACP over the process's stdin/stdout.

Order matters at startup: reserve fd 1 first (nothing may print into the protocol stream), then
answer the first `initialize` from the light modules only (early_initialize.py) and, when the next
line is a plain `session/new`, that too (early_session.py: the session reserved from the config
alone, written to disk before the answer), then harden the process and import the rest; the
agent's slow imports then run in a background thread, and the Agent takes over a session answered
early before any other request is read.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from acp_server.protocol.stdio_guard import ReservedStdio, reserve_stdio

if TYPE_CHECKING:
    from acp_server.process.early_initialize import EarlyStart
    from acp_server.process.watchdog import Watchdog


def _configure_logging() -> None:
    import logging  # here, not at the top: the early `initialize` answer goes out before logging loads

    from agent_core.config.option import ConfigError
    from agent_core.config.table import from_env

    try:
        level, problem = str(from_env("CONTINUAL_ACP_LOG_LEVEL", os.environ)), None
    except ConfigError as exc:  # also refused by load_config, so session/new names it too
        level, problem = "WARNING", exc
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level),
        format="continual-acp %(levelname)s %(name)s: %(message)s",
    )
    if problem is not None:
        logging.getLogger(__name__).error("%s", problem)


def _max_message_bytes() -> int:
    import logging

    from acp_server.protocol.transport import DEFAULT_MAX_LINE_BYTES
    from agent_core.config.option import ConfigError
    from agent_core.config.table import from_env

    try:
        return int(from_env("CONTINUAL_ACP_MAX_MESSAGE_BYTES", os.environ))
    except ConfigError as exc:  # also refused by load_config, so session/new names it too
        logging.getLogger(__name__).error("%s", exc)
        return DEFAULT_MAX_LINE_BYTES


def _watchdog(read_fd: int, kill_children: Callable[[], None] | None, parent_pid: int) -> Watchdog:
    import logging

    from acp_server.process.watchdog import DEFAULT_GRACE_SECONDS, DEFAULT_STALL_SECONDS, Watchdog
    from agent_core.config.option import ConfigError
    from agent_core.config.table import from_env

    def seconds(name: str, default: float) -> float:
        try:
            return float(from_env(name, os.environ))
        except ConfigError as exc:  # also refused by load_config, so session/new names it too
            logging.getLogger(__name__).error("%s", exc)
            return default

    return Watchdog(
        stall_seconds=seconds("CONTINUAL_ACP_STALL_SECONDS", DEFAULT_STALL_SECONDS),
        grace_seconds=seconds("CONTINUAL_ACP_EXIT_GRACE_SECONDS", DEFAULT_GRACE_SECONDS),
        input_fd=read_fd,
        kill_children=kill_children,
        parent_pid=parent_pid,
        report_dir=os.environ.get("CONTINUAL_ACP_STALL_REPORT") or None,
    )


def serve_stdio(
    *,
    agent_factory: Callable[[Any], Any] | None = None,
    agent_prepare: Callable[[], None] | None = None,
    extensions: Sequence[Callable[[Any], None]] = (),
    advertised: tuple[Sequence[str], Sequence[str]] | None = None,
    harden: Callable[[], object] | None = None,
    kill_children: Callable[[], None] | None = None,
) -> int:
    """Run the server until stdin closes; returns the exit code (0 after an orderly shutdown).

    `agent_factory(config)` builds the agent_core `Agent` (the composition root wires skills and
    refinement into it); `agent_prepare()` runs in the background import thread first (imports the
    factory will need, kept off the event loop); each `extensions` callable receives the `AcpServer` before the first
    message is read and may register methods on `server.registry` (e.g. `_harness/*`).

    `advertised`: the `(methods, notifications)` the extensions add to `initialize`; given, the
    first `initialize` is answered before anything heavy is imported (early_initialize.py).
    `harden()` runs right after that, before any kernel can exist (the composition root passes
    kernel_bridge's `make_undumpable`). `kill_children()` ends every process group the server
    started; the watchdog (acp_server/process/watchdog.py) calls it before a forced exit.
    """
    parent_pid = os.getppid()  # the editor, before anything can take long (acp_server/process/watchdog.py)
    reserved = reserve_stdio()
    early = None
    if advertised is not None:
        from acp_server.process.early_initialize import answer_first_initialize

        early = answer_first_initialize(reserved.read_fd, reserved.write_fd, *advertised)
        if early.ended:
            # No request came at all (stdin at /dev/null, as launch checks start agents): nothing to
            # answer or close, so exit now rather than start the loop and the agent to shut them down.
            return 0
        if early.params is not None:
            from acp_server.process.early_session import answer_first_session_new

            early = answer_first_session_new(reserved.read_fd, reserved.write_fd, early)
    if harden is not None:
        harden()
    _configure_logging()
    import anyio

    from acp_server.process.watchdog import install

    watchdog = install(_watchdog(reserved.read_fd, kill_children, parent_pid))
    try:
        anyio.run(_serve, reserved, agent_factory, agent_prepare, extensions, early, advertised, watchdog)
    except KeyboardInterrupt:
        return 130
    finally:
        watchdog.stop()
    return 0


async def _serve(
    reserved: ReservedStdio,
    agent_factory: Callable[[Any], Any] | None,
    agent_prepare: Callable[[], None] | None,
    extensions: Sequence[Callable[[Any], None]],
    early: EarlyStart | None,
    advertised: tuple[Sequence[str], Sequence[str]] | None,
    watchdog: Watchdog,
) -> None:
    import asyncio
    import logging

    import anyio

    from acp_server.protocol.pipes import open_reader, open_writer, prefixed
    from acp_server.protocol.registry import MethodRegistry
    from acp_server.protocol.transport import Connection
    from acp_server.sessions.methods import AcpServer

    watchdog.start()
    asyncio.get_running_loop().call_soon(watchdog.heartbeat)
    registry = MethodRegistry()
    server = AcpServer(registry, agent_factory=agent_factory, agent_prepare=agent_prepare)
    for extend in extensions:
        extend(server)
    if advertised is not None and server.advertised() != (sorted(advertised[0]), list(advertised[1])):
        logging.getLogger(__name__).error(
            "the early initialize advertised %r, the server registered %r", advertised, server.advertised()
        )
    if early is not None and early.params is not None:
        server.initialized_early(early.params)
    reader = prefixed(early.unread if early is not None else b"", await open_reader(reserved.read_fd))
    writer = await open_writer(reserved.write_fd)
    connection = Connection(reader, writer, registry, max_line_bytes=_max_message_bytes())
    server.use_connection(connection)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.warm_up_soon)
        tg.start_soon(server.start_agent)
        tg.start_soon(_stop_on_sigterm, tg.cancel_scope, server)
        if early is not None and early.session is not None:
            # Taken over before another request is read: none finds the answered session half open.
            tg.start_soon(_run_steps, await server.adopt_early_session(early.session))
        await connection.serve(on_eof=server.stop_turns)
        watchdog.input_ended("stdin closed")  # read here: an input the watchdog cannot poll ends too
        await server.shutdown()
        tg.cancel_scope.cancel()
    await writer.aclose()


async def _run_steps(steps: Sequence[Callable[[], Awaitable[None]]]) -> None:
    """An early-answered session's after-response steps, as the transport runs a handler's."""
    import logging

    for step in steps:
        try:
            await step()
        except Exception:
            logging.getLogger(__name__).exception("after-response step of session/new failed")


async def _stop_on_sigterm(scope: object, server: object) -> None:
    """SIGTERM (an editor closing the agent) gets the same orderly shutdown as EOF, then exit 0."""
    import signal  # here, not at the top: the early answers go out before it loads

    import anyio

    from acp_server.sessions.methods import AcpServer

    assert isinstance(server, AcpServer)
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            await server.stop_turns()
            await server.shutdown()
            assert isinstance(scope, anyio.CancelScope)
            scope.cancel()
            return
