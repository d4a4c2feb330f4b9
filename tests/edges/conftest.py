"""Fixtures for the edge tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from acp_client import AcpClient


@pytest.fixture
def hermetic_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose data dir is private to the test and whose model endpoint is loopback."""
    env = dict(os.environ)
    env["CONTINUAL_ACP_HOME"] = str(tmp_path / "home")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["OPENAI_API_KEY"] = "test-key"
    # Nothing listens on the discard port: initialize must not need the model.
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
    env["CONTINUAL_ACP_MODEL"] = "scripted"
    env["CONTINUAL_ACP_KERNEL_POOL"] = "0"  # no warm kernel for a server that may never run a cell
    return env


SpawnClient = Callable[..., AcpClient]


@pytest.fixture
def spawn_client() -> Iterator[SpawnClient]:
    """Start a command as an ACP agent with the suite's one stdio client; at teardown every agent must
    have kept stdout clean and every frame valid."""
    clients: list[AcpClient] = []

    def spawn(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> AcpClient:
        client = AcpClient(dict(env), argv=list(argv), cwd=str(cwd))
        clients.append(client)
        return client

    yield spawn
    problems: list[str] = []
    for client in clients:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()
        problems += [f"non-JSON on stdout: {line[:200]!r}" for line in client.garbage]
        problems += client.violations
    assert not problems, "\n".join(problems)
