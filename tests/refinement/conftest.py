"""Fixtures for refinement tests: real stores on disk, the scripted model over real HTTP, a coordinator."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_core.config.loader import AgentConfig
from agent_core.model import ModelClient
from agent_core.refinement import (
    CoordinatorEvent,
    HarnessSurface,
    ModelClientCompletion,
    Policy,
    QuiescenceChanged,
    RefineBudgets,
    RefinementCoordinator,
    RefinementPlanner,
    TrajectoryItem,
    refine_model,
)
from agent_core.testing.scripted_model import ScriptedModelServer, text
from harness_store import HarnessStore, global_root, local_root

SESSION_ID = "sess-1"

TRAJECTORY = [
    TrajectoryItem(
        "u-1", "user", "Please run the tests; we always use `make check` here, never bare pytest."
    ),
    TrajectoryItem("a-1", "assistant", "Understood, running make check."),
    TrajectoryItem("cell-1", "tool_call", "!make check", title="Run the checks"),
    TrajectoryItem("cell-1", "tool_result", "all 12 checks passed", status="completed"),
]


def plan_reply(*edits: dict[str, Any], summary: str = "Remember the test command") -> dict[str, Any]:
    return text(
        json.dumps(
            {
                "summary": summary,
                "rationale": "the user stated it",
                "expected_outcome": "tests run the project's way",
                "edits": list(edits),
            }
        )
    )


def memory_edit(
    content: str = "Run `make check`, not bare pytest.", *, evidence: Sequence[str] = ("u-1",)
) -> dict[str, Any]:
    return {
        "action": "create",
        "kind": "memory",
        "id": "test_command",
        "title": "Test command",
        "content": content,
        "evidence": list(evidence),
    }


def gate_reply(should: bool, *, scope: str = "local") -> dict[str, Any]:
    return text(json.dumps({"should_refine": should, "rationale": "a stated convention", "scope": scope}))


@dataclass
class Recorder:
    """A coordinator listener that records everything it is told, in order."""

    events: list[CoordinatorEvent] = field(default_factory=list)

    async def __call__(self, event: CoordinatorEvent) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def transitions(self) -> list[bool]:
        return [e.quiescent for e in self.of(QuiescenceChanged)]


@dataclass
class Rig:
    server: ScriptedModelServer
    local: HarnessStore
    glob: HarnessStore
    home: Path
    config: AgentConfig
    policy: Policy = field(default_factory=Policy)
    trajectory: list[TrajectoryItem] = field(default_factory=lambda: list(TRAJECTORY))
    clients: list[ModelClient] = field(default_factory=list)

    def model_client(self) -> ModelClient:
        client = ModelClient(self.config)
        self.clients.append(client)
        return client

    def planner(self, completion: Any = None) -> RefinementPlanner:
        client = completion or ModelClientCompletion(self.model_client(), model=refine_model(self.config))
        return RefinementPlanner(client, RefineBudgets.from_model_limit(self.config.max_output_tokens))

    async def aclose(self) -> None:
        # Close the HTTP clients inside the test's event loop (not at garbage collection).
        for client in self.clients:
            await client.aclose()
        self.clients.clear()

    def coordinator(self, **kwargs: Any) -> RefinementCoordinator:
        completion = kwargs.pop("completion", None)
        return RefinementCoordinator(
            session_id=SESSION_ID,
            local_store=self.local,
            global_store=self.glob,
            planner=self.planner(completion),
            trajectory=lambda: self.trajectory,
            policy=lambda: self.policy,
            **kwargs,
        )

    def harness(self, **kwargs: Any) -> tuple[RefinementCoordinator, HarnessSurface]:
        """A coordinator (the session's wiring: its worker, turn ends) and the one face over it."""
        coordinator = self.coordinator(**kwargs)
        return coordinator, HarnessSurface.of(coordinator)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    home = tmp_path / "home"
    with ScriptedModelServer() as server:
        config = AgentConfig(home=home, model="scripted-model", base_url=server.base_url, max_retries=0)
        yield Rig(
            server=server,
            local=HarnessStore(local_root(home, SESSION_ID)),
            glob=HarnessStore(global_root(home)),
            home=home,
            config=config,
        )


@asynccontextmanager
async def serving(coordinator: RefinementCoordinator, rig: Rig) -> AsyncIterator[RefinementCoordinator]:
    """Run the coordinator's worker and outbox for the duration of the block."""
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(coordinator.serve)
            try:
                yield coordinator
            finally:
                tg.cancel_scope.cancel()
    finally:
        await rig.aclose()


def system_prompts(server: ScriptedModelServer) -> list[str]:
    return [body["messages"][0]["content"] for body in server.requests]


def planner_requests(server: ScriptedModelServer) -> list[dict[str, Any]]:
    """The planner's requests (found by their system prompt, not by how many calls came before)."""
    from agent_core.refinement.prompts import PLANNER_SYSTEM_PROMPT

    return [body for body in server.requests if body["messages"][0]["content"] == PLANNER_SYSTEM_PROMPT]


def turn_requests(server: ScriptedModelServer) -> list[dict[str, Any]]:
    """The agent's turn requests: the calls that offer tools (the review gate and the planner do not)."""
    return [body for body in server.requests if body.get("tools")]


RequestCheck = Callable[[dict[str, Any]], bool]
