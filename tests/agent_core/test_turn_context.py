"""A turn needs only a `TurnContext`, not a whole Session: the loop runs against a small stand-in."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_helpers import config_for

from agent_core import events as ev
from agent_core.config.loader import AgentConfig
from agent_core.kernel.handle import KernelHandle
from agent_core.model import ModelClient
from agent_core.model_events import Usage
from agent_core.ports import EditorPort, NoEditor
from agent_core.testing import ScriptedModelServer, text, tool_call
from agent_core.turn.loop import TurnContext, TurnOutcome, run_turn_body

if TYPE_CHECKING:
    from agent_core.control_plane.held import HeldChange
    from kernel_bridge import KernelSession


class _Context:
    """Everything in memory; the kernel cannot start (no cell should need it)."""

    def __init__(self, config: AgentConfig, model: ModelClient) -> None:
        self.agent_config = config
        self.model = model
        self.editor: EditorPort = NoEditor()
        self.mode = "auto"
        self.model_name: str | None = config.model
        self.model_accepts_images = True
        self.max_turn_requests = 3
        self.always_allowed = False
        self.stream_fallback_told = False
        self.messages: list[dict[str, Any]] = []
        self.usage: list[Usage] = []
        self.kernel_handle = KernelHandle(self._no_kernel, label="stand-in")
        self.control_plane = None  # no guard: nothing under .continual-acp/ is watched

    async def _no_kernel(self) -> KernelSession:
        raise RuntimeError("this context has no kernel")

    def append_message(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def system_prompt(self, parts: Sequence[ev.PromptPart] = ()) -> str:
        return "You are a test."

    def usage_event(self, usage: Usage) -> ev.UsageReport:
        self.usage.append(usage)
        return ev.UsageReport(used=0, size=0)

    async def maybe_compact(self) -> None:
        return None

    async def compact_for_overflow(self) -> bool:
        return False

    def drop_images(self) -> bool:
        return False

    async def kernel(self) -> KernelSession:
        return await self.kernel_handle.get()

    def take_steering(self) -> list[tuple[Sequence[ev.PromptPart], str | None]]:
        return []

    steering_waiting = False

    def turn_context(self) -> str | None:
        return None

    async def cells_need_approval(self) -> bool:
        return False

    async def hold_control_plane_change(self, held: HeldChange) -> str | None:
        return None

    async def publish(self, event: ev.TurnEvent) -> None:
        return None


def _run(
    tmp_path: Path, script: list[dict[str, Any]]
) -> tuple[TurnOutcome, list[ev.TurnEvent], _Context, list[Any]]:
    async def scenario(server: ScriptedModelServer) -> tuple[TurnOutcome, list[ev.TurnEvent], _Context]:
        config = config_for(tmp_path, server)
        model = ModelClient(config)
        context = _Context(config, model)
        typed: TurnContext = context  # the stand-in is a TurnContext for the type checker too
        events: list[ev.TurnEvent] = []
        try:
            outcome = await run_turn_body(typed, [ev.TextPart("hello")], events.append)
        finally:
            await model.aclose()
        return outcome, events, context

    with ScriptedModelServer(script) as server:
        outcome, events, context = asyncio.run(scenario(server))
        return outcome, events, context, list(server.requests)


def test_a_text_answer_runs_against_a_stand_in_context(tmp_path: Path) -> None:
    outcome, events, context, requests = _run(tmp_path, [text("hi there")])
    assert outcome == TurnOutcome("end_turn")
    assert "".join(e.text for e in events if isinstance(e, ev.MessageChunk)) == "hi there"
    assert [m["role"] for m in context.messages] == ["user", "assistant"]
    assert requests[0]["messages"][0] == {"role": "system", "content": "You are a test."}


def test_a_kernel_that_cannot_start_fails_the_cell_and_the_model_is_told(tmp_path: Path) -> None:
    outcome, events, context, _ = _run(tmp_path, [tool_call("print(1)"), text("ok")])
    finished = [e for e in events if isinstance(e, ev.CellFinished)]
    assert [(f.status, f.error) for f in finished] == [
        ("failed", "the kernel could not start: this context has no kernel")
    ]
    assert context.messages[2]["content"].startswith("Error: the kernel could not start")
    assert outcome == TurnOutcome("end_turn")
