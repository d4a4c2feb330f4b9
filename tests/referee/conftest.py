from __future__ import annotations

from acp_fixtures import model, session, spawn

__all__ = ["model", "session", "spawn"]
