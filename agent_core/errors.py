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
