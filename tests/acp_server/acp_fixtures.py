"""The stdio fixtures (`model`, `spawn`, `session`) that conftests of ACP-over-stdio tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from acp_client import AcpClient, close_and_check, server_env
from acp_helpers import ClientFactory, initialize, new_session

from agent_core.testing.scripted_model import ScriptedModelServer


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[ClientFactory]:
    """Spawn real servers; at teardown every one must have kept stdout clean and every frame valid."""
    clients: list[AcpClient] = []

    def factory(model_url: str | None = None, *, argv: list[str] | None = None, **env: str) -> AcpClient:
        home = tmp_path / f"home{len(clients)}"
        home.mkdir()
        client = AcpClient(server_env(home, model_url, **env), argv=argv, cwd=str(tmp_path))
        clients.append(client)
        return client

    yield factory
    problems: list[str] = []
    for client in clients:
        problems += close_and_check(client)
    assert not problems, "\n".join(problems)


@pytest.fixture
def session(spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path) -> tuple[AcpClient, str]:
    """A real server with one initialized session in `tmp_path`."""
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    return client, sid
