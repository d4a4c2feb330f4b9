"""One real server per configuration, shared by the tests of a module that need only a fresh session.

A server start costs ~1.5 s of CPU (imports, the model client's imports at the first request) before
the kernel; most stdio tests need nothing but their own session. `SharedServers` starts one server
(with its own scripted endpoint) per configuration on first use; `SharedServers.test(cwd)` gives a
test `Here`s on them and, at its end, closes its sessions, puts back the client's permission answers
and drops what is left of the script. A `Here` reads only what arrived since its test began: the
chat requests, the agent's requests to the client, the frames of its own session.

A test that restarts or kills the server, needs its own home or env, or depends on process-wide state
(a first-prompt-only behaviour, a warning logged once per process) keeps its own server (`spawn`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, Frame, close_and_check, select, server_env
from acp_helpers import initialize

from agent_core.testing.scripted_model import ScriptedModelServer


@dataclass
class Here:
    """One test's session on a shared server, and where the shared logs stood when it began."""

    model: ScriptedModelServer
    client: AcpClient
    sid: str
    requests_at: int
    frames_at: int
    asked_at: int
    disconnects_at: int
    stderr_at: int
    home: Path  # the server's CONTINUAL_ACP_HOME (shared by every test on it)

    def requests(self) -> list[dict[str, Any]]:
        """The chat requests of this test (the endpoint's log holds the earlier tests' too)."""
        return self.model.requests[self.requests_at :]

    def agent_requests(self, method: str | None = None) -> list[dict[str, Any]]:
        """The agent's requests to the client since this test began (of `method`, if given)."""
        asked = self.client.agent_requests[self.asked_at :]
        return [r for r in asked if method is None or r["method"] == method]

    def mine(self, message: dict[str, Any]) -> bool:
        return bool(message.get("params", {}).get("sessionId") == self.sid)

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> Frame:
        """The first matching message about this test's session since it began (a late one of an
        earlier test's session must not match)."""
        return self.client.wait_for_after(self.frames_at, lambda m: self.mine(m) and predicate(m), timeout)

    def frames(self) -> list[Frame]:
        """Every frame since this test began (any session's: the server's own notifications too)."""
        return self.client.frames[self.frames_at :]

    def wait_for_disconnects(self, count: int = 1, timeout: float = 30.0) -> bool:
        """`ScriptedModelServer.wait_for_disconnects`, counting only this test's hang-ups."""
        return self.model.wait_for_disconnects(self.disconnects_at + count, timeout)

    def stderr(self) -> str:
        """What the server logged since this test began."""
        return self.client.stderr()[self.stderr_at :]


@dataclass
class _Served:
    model: ScriptedModelServer
    client: AcpClient
    home: Path


class SharedServers:
    """The module's servers, one per configuration name, each with its own scripted endpoint."""

    def __init__(self, stack: ExitStack, factory: pytest.TempPathFactory) -> None:
        self._stack = stack
        self._factory = factory
        self._served: dict[str, _Served] = {}

    def get(self, config: str = "", *, toml: str = "", **env: str) -> _Served:
        """The server of configuration `config` (started at first use with `toml` as its
        config.toml and `env` added to its environment; later calls must pass the same)."""
        if config not in self._served:
            model = self._stack.enter_context(ScriptedModelServer())
            home = self._factory.mktemp("shared-home")
            extra = dict(env)
            if toml:
                path = home / "config.toml"
                path.write_text(toml, encoding="utf-8")
                extra["CONTINUAL_ACP_CONFIG"] = str(path)
            client = AcpClient(server_env(home, model.base_url, **extra), cwd=str(home))
            initialize(client)
            self._served[config] = _Served(model, client, home)
        return self._served[config]

    @contextmanager
    def test(self, cwd: Path) -> Iterator[Callable[..., Here]]:
        """`open(config="", *, session_cwd=None, mcp_servers=None, **get_kwargs)`: a new session
        (in `session_cwd`, by default `cwd`) on that server; every session opened is closed at the
        end, and each server used is left as the next test expects."""
        opened: list[Here] = []

        def open_(
            config: str = "",
            *,
            session_cwd: Path | None = None,
            mcp_servers: list[dict[str, Any]] | None = None,
            **kwargs: str,
        ) -> Here:
            served = self.get(config, **kwargs)
            model, client = served.model, served.client
            marks = (
                len(model.requests),
                len(client.frames),
                len(client.agent_requests),
                model.disconnects,
                len(client.stderr()),
            )
            new = {"cwd": str(session_cwd or cwd), "mcpServers": mcp_servers or []}
            sid = str(client.request("session/new", new)["sessionId"])
            here = Here(model, client, sid, *marks, served.home)
            opened.append(here)
            return here

        try:
            yield open_
        finally:
            for here in opened:
                try:
                    here.client.request("session/close", {"sessionId": here.sid}, timeout=30)
                except Exception:  # closed by the test itself, or broken: must not hide its failure
                    pass
                here.client.permission_policy = select("allow_once")
                here.client.hold_permissions = False
                here.model.clear_script()

    def close(self) -> list[str]:
        problems: list[str] = []
        for served in self._served.values():
            problems += close_and_check(served.client)
        return problems


@contextmanager
def shared_servers(factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    """For a module-scoped fixture: the servers, closed (and checked) at the module's end."""
    with ExitStack() as stack:
        made = SharedServers(stack, factory)
        try:
            yield made
        finally:
            problems = made.close()
        assert not problems, "\n".join(problems)
