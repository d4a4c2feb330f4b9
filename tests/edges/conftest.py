"""Fixtures for the edge tests."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from acp_edge_support import StdioPeer


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
    return env


@pytest.fixture
def spawn_peer() -> Iterator[Any]:
    peers: list[StdioPeer] = []

    def spawn(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> StdioPeer:
        peer = StdioPeer(argv, env=env, cwd=cwd)
        peers.append(peer)
        return peer

    yield spawn
    for peer in peers:
        if peer.proc.poll() is None:
            peer.proc.kill()
            peer.proc.wait()
