"""Starting the panel: `continual-acp harness ui [--port N] [--no-open]`, and `ensure_panel(home)`.

The server binds 127.0.0.1 only and prints its URL (with the random token) on stdout — this command
is not the ACP server, so stdout is free here. `ensure_panel` runs the same server on a daemon
thread with its own event loop inside a running ACP server (for `/harness ui`): the ACP loop is
never blocked by panel requests, and the panel lives as long as the process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import signal
import sys
import threading
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_server.panel.link import ServerLink

HOST = "127.0.0.1"


def new_token() -> str:
    """32 random bytes, url-safe (it travels in the URL)."""
    return secrets.token_urlsafe(32)


class PanelServer:
    """One running panel (aiohttp runner + site) over one data home."""

    def __init__(
        self, home: Path, *, port: int = 0, token: str | None = None, link: ServerLink | None = None
    ) -> None:
        self.home = Path(home)
        self.port = port
        self.token = token or new_token()
        self.link = link
        self._runner: Any = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/?token={self.token}"

    async def start(self) -> str:
        """Bind and serve; returns the URL (the port is the one bound when `port` was 0)."""
        from aiohttp import web

        from acp_server.panel.app import build_app
        from acp_server.panel.sources import PanelData

        data = PanelData(self.home)
        await asyncio.to_thread(data.views)  # read the histories once now: the first page is quick
        runner = web.AppRunner(
            build_app(data, self.token, link=self.link), access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        site = web.TCPSite(runner, HOST, self.port)
        await site.start()
        self._runner = runner
        sockets = getattr(site._server, "sockets", None) or []  # the bound port when asked for 0
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        return self.url

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


def default_home() -> Path:
    """The data home the agent writes to (the same rules as the server's config)."""
    from agent_core.config.loader import load_config

    try:
        return Path(load_config().home)
    except ValueError:
        import os

        from agent_core.config.loader import default_home as home_from_env

        return home_from_env(os.environ)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="continual-acp harness ui", description="Serve the harness review panel on 127.0.0.1."
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    parser.add_argument("--no-open", action="store_true", help="print the URL but do not open a browser")
    return parser


async def _serve(home: Path, port: int, open_browser: bool) -> None:
    server = PanelServer(home, port=port)
    url = await server.start()
    print(f"Harness review panel: {url}", flush=True)
    print("(only this URL, with its token, is accepted; Ctrl-C stops the panel)", file=sys.stderr, flush=True)
    if open_browser:
        await asyncio.to_thread(webbrowser.open, url)
    # Ctrl-C / SIGTERM set an event instead of raising KeyboardInterrupt wherever the main thread
    # happens to be (inside a worker-thread handoff it could leave the loop waiting on that thread).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows' default loop
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()


def main(argv: Sequence[str], home: Path | None = None) -> int:
    """`continual-acp harness ui ...`; runs until interrupted. Returns the exit code."""
    args = _parser().parse_args(list(argv))
    if not 0 <= args.port <= 65535:
        print(f"continual-acp harness ui: error: --port must be 0..65535, not {args.port}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(home or default_home(), args.port, not args.no_open))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"continual-acp harness ui: error: cannot listen on {HOST}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


_running: dict[Path, PanelServer] = {}
_running_lock = threading.Lock()


def ensure_panel(
    home: Path, *, link: ServerLink | None = None, session_id: str | None = None, timeout: float = 30.0
) -> str:
    """The URL of this process's panel over `home`, starting it on a daemon thread if needed.

    `link` (the ACP server's open sessions) is used when this call starts the panel; `session_id`
    (who asked) then acts for the global store. Blocks until the panel listens (call it from a
    worker thread in async code). Raises `OSError` when it cannot listen.
    """
    home = Path(home)
    with _running_lock:
        found = _running.get(home)
        if found is not None:
            if found.link is not None and session_id is not None:
                found.link.prefer(session_id)
            return found.url
        if link is not None and session_id is not None:
            link.prefer(session_id)
        server = PanelServer(home, link=link)
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(server.start())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            loop.run_forever()

        threading.Thread(target=run, name="harness-panel", daemon=True).start()
        if not started.wait(timeout):
            raise OSError(f"the harness panel did not start within {timeout:g} s")
        if failure:
            raise OSError(f"the harness panel could not start: {failure[0]}") from failure[0]
        _running[home] = server
        return server.url
