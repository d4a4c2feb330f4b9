from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from acp_client import AcpClient, close_and_check, reap_closing
from acp_fixtures import model, session, spawn
from boundary_support import Area, area, identity, require_backend, spawn_as

__all__ = ["Boundary", "boundary", "model", "session", "spawn"]


class Boundary:
    """Areas and servers of one test, as one identity (see boundary_support): at teardown every
    server is told to exit and waited for (its area is removed after it), and each must have kept
    stdout clean, sent valid frames and exited 0."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self.clients: list[AcpClient] = []

    def area(self, user: str) -> Area:
        return self._stack.enter_context(area(identity(user)))

    def spawn(
        self, place: Area, backend: str, model_url: str, config_extra: str = "", **env: str
    ) -> AcpClient:
        require_backend(backend, place.who)
        client = spawn_as(place, backend, model_url, config_extra, **env)
        self.clients.append(client)
        return client

    def close(self) -> list[str]:
        problems: list[str] = []
        for client in self.clients:
            problems += close_and_check(client)
        return problems + reap_closing(keep=0)


@pytest.fixture
def boundary() -> Iterator[Boundary]:
    with ExitStack() as stack:
        made = Boundary(stack)
        try:
            yield made
        finally:
            problems = made.close()
        assert not problems, "\n".join(problems)
