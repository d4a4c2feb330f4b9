"""The two model calls of a refinement: the review gate and the planner.

Neither touches a store: the gate returns a verdict and the planner returns a `Proposal` (untrusted
input, normalized by the store's model). Applying is the coordinator's job, under the store lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_core.refinement.completion import CompletionClient, RefineBudgets
from agent_core.refinement.extract import extract_json_object
from agent_core.refinement.prompts import (
    PLANNER_SYSTEM_PROMPT,
    REVIEW_SYSTEM_PROMPT,
    planner_user_prompt,
    review_user_prompt,
)
from agent_core.refinement.records import ReviewVerdict, Scope
from agent_core.refinement.trajectory import (
    PLANNER_WINDOW_CHARS,
    REVIEW_WINDOW_CHARS,
    TOOL_RESULT_CHARS,
    TrajectoryItem,
    render_trajectory,
)
from harness_store import Proposal


@dataclass(frozen=True)
class Windows:
    """How much trajectory each call sees (characters) and how much of each tool result."""

    review_chars: int = REVIEW_WINDOW_CHARS
    planner_chars: int = PLANNER_WINDOW_CHARS
    tool_result_chars: int = TOOL_RESULT_CHARS


def _truthy(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in {"true", "yes", "1"}
    return False


class RefinementPlanner:
    def __init__(
        self, client: CompletionClient, budgets: RefineBudgets, windows: Windows | None = None
    ) -> None:
        self.client = client
        self.budgets = budgets
        self.windows = windows or Windows()

    async def review(self, items: Sequence[TrajectoryItem], *, trigger_note: str) -> ReviewVerdict:
        """Ask whether this checkpoint deserves a refinement. Parse failures raise ReplyParseError."""
        trajectory = render_trajectory(
            items, max_chars=self.windows.review_chars, tool_result_chars=self.windows.tool_result_chars
        )
        reply = await self.client.complete(
            system=REVIEW_SYSTEM_PROMPT,
            user=review_user_prompt(trajectory, trigger_note=trigger_note),
            max_tokens=self.budgets.review_max_tokens,
        )
        data = extract_json_object(reply.text, finish_reason=reply.finish_reason, reasoning=reply.reasoning)
        instructions = data.get("instructions")
        scope: Scope = "global" if data.get("scope") == "global" else "local"
        return ReviewVerdict(
            should_refine=_truthy(data.get("should_refine")),
            rationale=str(data.get("rationale") or ""),
            instructions=instructions if isinstance(instructions, str) and instructions.strip() else None,
            scope=scope,
        )

    async def plan(
        self,
        items: Sequence[TrajectoryItem],
        *,
        overview: str,
        history: Sequence[str],
        scope: Scope,
        instructions: str | None,
    ) -> Proposal:
        """Write a proposal. Parse failures raise ReplyParseError (truncated / invalid / none)."""
        trajectory = render_trajectory(
            items, max_chars=self.windows.planner_chars, tool_result_chars=self.windows.tool_result_chars
        )
        reply = await self.client.complete(
            system=PLANNER_SYSTEM_PROMPT,
            user=planner_user_prompt(
                overview=overview,
                history=history,
                trajectory=trajectory,
                scope=scope,
                instructions=instructions,
            ),
            max_tokens=self.budgets.planner_max_tokens,
        )
        data = extract_json_object(reply.text, finish_reason=reply.finish_reason, reasoning=reply.reasoning)
        return Proposal.model_validate(data)
