"""One plain (no tools) model call for the review gate and the planner, and its output budget.

The coordinator depends on the `CompletionClient` protocol only. `ModelClientCompletion` adapts the
agent's own `ModelClient` (retries, error messages, reasoning-field handling) and picks the optional
cheaper `CONTINUAL_ACP_REFINE_MODEL`. Reasoning is never switched off: some models cannot disable it,
and asking them to is an error; the reasoning text is kept apart so a reasoning-only reply can still
be examined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# Caps on the output budget, applied to the model's configured maximum (never a fixed literal that
# would clip a large proposal on a model that allows more): the gate answers one small object but a
# reasoning model may think first; a plan with many edits (skills with code) is long.
REVIEW_OUTPUT_CAP = 8_192
PLANNER_OUTPUT_CAP = 32_768


@dataclass(frozen=True)
class Completion:
    text: str
    reasoning: str
    finish_reason: str | None


@dataclass(frozen=True)
class RefineBudgets:
    review_max_tokens: int
    planner_max_tokens: int

    @classmethod
    def from_model_limit(cls, max_output_tokens: int | None) -> RefineBudgets:
        """Budgets from the model's configured output limit, each capped."""
        limit = max_output_tokens if max_output_tokens and max_output_tokens > 0 else PLANNER_OUTPUT_CAP
        return cls(min(limit, REVIEW_OUTPUT_CAP), min(limit, PLANNER_OUTPUT_CAP))


class CompletionClient(Protocol):
    async def complete(
        self, *, system: str, user: str, max_tokens: int, schema: Mapping[str, Any] | None = None
    ) -> Completion: ...


class _Completes(Protocol):
    """The slice of `agent_core.model.ModelClient` used here."""

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> Any: ...


class ModelClientCompletion:
    """A `CompletionClient` over the agent's `ModelClient`; `model=None` uses the session's model."""

    def __init__(self, client: _Completes, *, model: str | None = None) -> None:
        self.client = client
        self.model = model

    async def complete(
        self, *, system: str, user: str, max_tokens: int, schema: Mapping[str, Any] | None = None
    ) -> Completion:
        """`schema`: the reply's JSON shape, asked as structured output where the endpoint takes it."""
        done = await self.client.complete(
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            model=self.model,
            max_tokens=max_tokens,
            schema=schema,
        )
        return Completion(done.text, done.reasoning, done.finish_reason or None)


def refine_model(config: Any) -> str | None:
    """The model for review and planning: `CONTINUAL_ACP_REFINE_MODEL` if set, else the agent's model."""
    return getattr(config, "refine_model", None) or getattr(config, "model", None)
