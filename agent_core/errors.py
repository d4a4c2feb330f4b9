"""Errors agent_core raises to its callers (acp_server maps them onto JSON-RPC errors)."""

from __future__ import annotations


class SessionNotFound(LookupError):
    """No session with this id in memory or on disk."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} not found")
        self.session_id = session_id


class ModelError(RuntimeError):
    """The model endpoint failed for good (after retries); the message says what to check."""

    def __init__(self, message: str, *, endpoint: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.endpoint = endpoint
        self.status = status


class PermissionRequestFailed(RuntimeError):
    """The client answered a permission request with an error (not a user decision): the cell does not run."""


class SessionInUse(RuntimeError):
    """Another continual-acp process has the session open (it holds `sessions/<id>/owner.lock`)."""

    def __init__(self, session_id: str, pid: int | None) -> None:
        owner = f" (pid {pid})" if pid else ""
        super().__init__(
            f"session {session_id} is open in another continual-acp process{owner}; close it there first"
        )
        self.session_id = session_id
        self.pid = pid


class KernelBackendUnavailable(RuntimeError):
    """The configured kernel backend cannot start kernels (checked at `session/new`, load, resume).

    `backend` is the configured kind ("local", "sandbox", "gateway", "provisioner"); the message
    names what is wrong and the fix.
    """

    def __init__(self, backend: str, message: str) -> None:
        super().__init__(message)
        self.backend = backend
        self.message = message
