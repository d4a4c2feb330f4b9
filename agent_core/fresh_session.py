"""A `session/new` answered before the Agent exists: the id, settings and kernel guarantees a fresh
session will have, its directory reserved in the data dir.

acp_server/process/early_session.py answers an editor's first `session/new` with it, and the server then
creates the session under that id (`Agent.new_session(session_id=...)`) before it reads another
request. Only the plain case is reserved, the one a freshly launched server meets; in every other
case `reserve` returns None and the full path answers (its errors included): the configuration
loads without a warning (`load_config`, what the Agent reads too), a model is set up, the kernel
backend is `local` on this interpreter with ipykernel importable (all `Agent.check_kernel_backend`
checks for it), the cwd is an existing directory, and the session could be written: its directory
(0700), its owner lock, its transcript header and `meta.json`, as `SessionStore.create` writes them.
So the answer given is the one the Agent would give, the session it names exists on disk (another
process may load it at once; one killed before the Agent took over leaves a loadable session, as a
crash after a session/new always did), and an unwritable data dir is still the full path's clear
error, never a late surprise.

Light on purpose (it runs before asyncio or the Agent's modules load): no `uuid` (it imports
`platform`), no `logging`, no session store.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_core.config.loader import AgentConfig, load_config
from agent_core.errors import SessionInUse
from agent_core.history.ownership import LOCK_FILE, SessionOwnerLock
from agent_core.history.session_files import META, TRANSCRIPT, header_record, meta_record, now_iso
from host_base.private_files import create_private, private_dir, write_atomic
from kernel_bridge.guarantees import LOCAL, KernelGuarantees

__all__ = ["FreshSession", "new_session_id", "reserve"]


class FreshSession:
    """A reserved session: what its `session/new` answer says (`mode`, `config` and
    `available_models` as `Session` has them when new), its files and its owner lock, which the
    Agent takes over (`Agent.new_session(reserved=...)`). (A plain class: a dataclass compiles its
    methods at import, on the path this module is on.)"""

    __slots__ = ("agent_config", "created_at", "cwd", "directory", "guarantees", "owner", "session_id")

    def __init__(
        self,
        session_id: str,
        directory: Path,
        cwd: str,
        created_at: str,
        owner: SessionOwnerLock,
        agent_config: AgentConfig,
        guarantees: KernelGuarantees,
    ) -> None:
        self.session_id = session_id
        self.directory = directory
        self.cwd = cwd
        self.created_at = created_at
        self.owner = owner
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
        """The Agent could not take the session over: let go of its lock. Its files stay (the
        answer said it exists; another process, or a later server, may load it)."""
        self.owner.release()


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
        private_dir(config.home)  # as `SessionStore.create`: the data home, then its sessions dir
        private_dir(config.sessions_dir)
        directory.mkdir(mode=0o700)
    except OSError:
        return None
    try:
        resolved = str(Path(cwd).resolve())
        resolved.encode("utf-8")  # a lone surrogate: the store's writer scrubs it, so leave it to the store
        created = now_iso()
        owner = SessionOwnerLock.acquire(directory, directory.name)
    except (OSError, ValueError, SessionInUse):
        _remove(directory)
        return None
    try:
        _write_files(directory, directory.name, resolved, created)
    except (OSError, ValueError):
        owner.release()
        _remove(directory)
        return None
    return FreshSession(directory.name, directory, resolved, created, owner, config, LOCAL)


def _write_files(directory: Path, session_id: str, cwd: str, created: str) -> None:
    """What `SessionStore.create` writes: the transcript's header line, then `meta.json`."""
    header = json.dumps(header_record(session_id, cwd, created), ensure_ascii=False, separators=(",", ":"))
    create_private(directory / TRANSCRIPT, header + "\n", append=True)
    meta = meta_record(session_id, cwd=cwd, title=None, created_at=created, updated_at=created)
    write_atomic(directory / META, json.dumps(meta), sync=False)


def _remove(directory: Path) -> None:
    """Undo a reservation that did not complete (nothing answered it)."""
    for name in (TRANSCRIPT, META, LOCK_FILE):
        try:
            (directory / name).unlink()
        except OSError:
            pass
    try:
        directory.rmdir()
    except OSError:
        pass
