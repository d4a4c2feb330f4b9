"""A `session/new` answered before the Agent exists: the id, settings and kernel guarantees a fresh
session will have, its directory reserved in the data dir.

acp_server/early_session.py answers an editor's first `session/new` with it, and the server then
creates the session under that id (`Agent.new_session(session_id=...)`) before it reads another
request. Only the plain case is reserved, the one a freshly launched server meets; in every other
case `reserve` returns None and the full path answers (its errors included): the configuration
loads without a warning (`load_config`, what the Agent reads too), a model is set up, the kernel
backend is `local` on this interpreter with ipykernel importable (all `Agent.check_kernel_backend`
checks for it), the cwd is an existing directory, and the session's directory could be created
(0700, as the store makes it). So the answer given is the one the Agent would give, and an
unwritable data dir is still the full path's clear error, never a late surprise.

Light on purpose (it runs before asyncio or the Agent's modules load): no `uuid` (it imports
`platform`), no `logging`, no session store.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_core.config.loader import AgentConfig, load_config
from kernel_bridge.guarantees import LOCAL, KernelGuarantees
from kernel_bridge.output import private_dir

__all__ = ["FreshSession", "new_session_id", "reserve"]


class FreshSession:
    """A reserved session: what its `session/new` answer says (`mode`, `config` and
    `available_models` as `Session` has them when new) and where it will live. (A plain class: a
    dataclass compiles its methods at import, on the path this module is on.)"""

    __slots__ = ("agent_config", "directory", "guarantees", "session_id")

    def __init__(
        self, session_id: str, directory: Path, agent_config: AgentConfig, guarantees: KernelGuarantees
    ) -> None:
        self.session_id = session_id
        self.directory = directory
        self.agent_config = agent_config
        self.guarantees = guarantees

    @property
    def mode(self) -> str:
        return str(self.config["mode"])

    @property
    def config(self) -> dict[str, Any]:
        return self.agent_config.session_defaults()

    def available_models(self) -> list[str]:
        return self.agent_config.session_models()

    def release(self) -> None:
        """Remove the reserved directory while it is still empty (the session was not created)."""
        try:
            os.rmdir(self.directory)
        except OSError:
            pass  # already gone, or the session was written into it after all


def new_session_id() -> str:
    """`sess_` and a random version-4 UUID in hex, as `Agent.new_session` names sessions."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return f"sess_{raw.hex()}"


def _load_quietly(env: Mapping[str, str]) -> AgentConfig | None:
    """The configuration, or None when it is refused or warns: the full path loads it again and
    reports either (once, through the server's logging, not twice)."""
    try:
        config = load_config(env, log_warnings=False)
    except (ValueError, OSError):
        return None
    return None if config.warnings else config


def reserve(cwd: str, env: Mapping[str, str] | None = None) -> FreshSession | None:
    """A session reserved for `session/new` in `cwd`, or None when the full path must answer (see
    the module docstring)."""
    config = _load_quietly(os.environ if env is None else env)
    if config is None or not config.model_setup_complete:
        return None
    if config.kernel_backend.kind != "local" or config.kernel_python is not None:
        return None
    try:
        if importlib.util.find_spec("ipykernel") is None:
            return None
        if not os.path.isabs(cwd) or not Path(cwd).resolve().is_dir():
            return None
    except (OSError, ValueError, ImportError):
        return None
    directory = config.sessions_dir / new_session_id()
    try:
        private_dir(config.sessions_dir)
        directory.mkdir(mode=0o700)
    except OSError:
        return None
    return FreshSession(directory.name, directory, config, LOCAL)
