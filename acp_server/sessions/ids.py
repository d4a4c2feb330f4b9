"""A `sessionId` from the client, checked against the agent's store before anything follows its path.

Shared by the session methods of the server (methods.py) and the feature methods (extensions.py),
which must not import the server's module for it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from acp_server.protocol.errors import AcpError

if TYPE_CHECKING:
    from agent_core.agent import Agent


def check_session_id(agent: Agent, session_id: str) -> None:
    """-32602 naming the id when its directory is unsafe (a symbolic link, a file in its place):
    client input, so never an internal error, and refused before anything follows the path. An id
    that can never name a stored session (`..`, a path, NUL, too long) is left to the caller: it is
    an unknown session (-32002 naming it), and deleting one is a no-op."""
    from agent_core.history.transcript import UnsafeSessionPath

    shown = session_id if len(session_id) <= 40 else f"{session_id[:40]}..."
    try:
        directory = agent.store.session_dir(session_id)
    except UnsafeSessionPath as exc:
        raise AcpError.invalid_params(f"sessionId {shown!r} is refused: {exc}") from None
    except ValueError:
        return
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise AcpError.invalid_params(
            f"sessionId {shown!r} is refused: {directory} is not a directory (move the file away)"
        )
