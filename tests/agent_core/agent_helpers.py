"""Shared pieces for agent_core tests: a scripted endpoint, an agent on it, a recording editor."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agent_core import Agent, AgentConfig, Session, load_config
from agent_core.events import PromptPart, TextPart, TurnEvent
from agent_core.ports import PermissionDecision, PermissionRequest
from agent_core.testing import ScriptedModelServer


def config_for(home: Path, server: ScriptedModelServer | None, **overrides: Any) -> AgentConfig:
    env = {"CONTINUAL_ACP_HOME": str(home / "data"), "HOME": str(home), "CONTINUAL_ACP_KERNEL_POOL": "0"}
    if server is not None:
        env |= {
            "CONTINUAL_ACP_MODEL": "scripted-model",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "k",
        }
    config = load_config(env)
    config.eager_kernel = False  # tests that never run a cell never pay for a kernel
    config.max_retries = 2
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


@asynccontextmanager
async def running_agent(config: AgentConfig) -> AsyncIterator[Agent]:
    agent = Agent(config)
    await agent.start()
    try:
        yield agent
    finally:
        await agent.aclose()


async def collect(session: Session, prompt: str | Sequence[PromptPart]) -> list[TurnEvent]:
    parts = [TextPart(prompt)] if isinstance(prompt, str) else list(prompt)
    return [event async for event in session.run_turn(parts)]


def of_type(events: Sequence[TurnEvent], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


class RecordingEditor:
    """An EditorPort that answers permission requests from a script and keeps files in buffers."""

    def __init__(
        self,
        decisions: Sequence[PermissionDecision] = (),
        *,
        files: dict[str, str] | None = None,
        fs: bool = False,
    ) -> None:
        self.decisions = list(decisions)
        self.requests: list[PermissionRequest] = []
        self.files = dict(files or {})
        self.writes: list[tuple[str, str]] = []
        self._fs = fs
        self.permission_asked = asyncio.Event()
        self.hold_permission = False

    @property
    def can_read_files(self) -> bool:
        return self._fs

    @property
    def can_write_files(self) -> bool:
        return self._fs

    async def request_permission(self, request: PermissionRequest) -> PermissionDecision:
        self.requests.append(request)
        self.permission_asked.set()
        if self.hold_permission:
            await asyncio.Event().wait()  # an editor whose user never answers
        return self.decisions.pop(0) if self.decisions else "allow_once"

    async def read_text_file(self, path: str) -> str:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    async def write_text_file(self, path: str, content: str) -> None:
        self.writes.append((path, content))
        self.files[path] = content
