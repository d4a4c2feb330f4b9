"""Shared by the tests/edges/test_defect_*.py files: real servers over stdio via the acp_server test client.

A module of its own (not conftest) so its name is unique across test directories.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "acp_server"))

from acp_client import AcpClient, RpcError, close_and_check, server_env
from acp_helpers import initialize, new_session, prompt, run_command

__all__ = ["AcpClient", "RpcError", "initialize", "new_session", "prompt", "run_command", "served"]


@contextmanager
def served(
    home: Path, cwd: Path, model_url: str | None = None, *, argv: list[str] | None = None, **env: str
) -> Iterator[AcpClient]:
    """A real server on `home`, initialized; closed at exit with stdout and every frame checked."""
    client = AcpClient(server_env(home, model_url, **env), argv=argv, cwd=str(cwd))
    try:
        initialize(client)
        yield client
    finally:
        problems = close_and_check(client)
    assert not problems, "\n".join(problems)
