"""The two model calls of a refinement: the review gate and the planner.

Neither touches a store: the gate returns a verdict and the planner returns a `Plan` -- the
proposal for the refinement's scope and, apart, the edits it marked `"scope": "project"` (untrusted
input, normalized by the store's model; an edit's `about` paths go to `metadata.about`, where the
project rule reads them). Applying is the coordinator's job, under the store lock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_core.refinement.completion import CompletionClient, RefineBudgets
from agent_core.refinement.extract import extract_json_object
from agent_core.refinement.prompts import (
    PLANNER_SYSTEM_PROMPT,
    REVIEW_SYSTEM_PROMPT,
    planner_user_prompt,
    review_user_prompt,
)
from agent_core.refinement.records import ReviewVerdict, Scope
from agent_core.refinement.reply_schemas import REVIEW_SCHEMA, plan_schema
from agent_core.refinement.trajectory import (
    PLANNER_WINDOW_CHARS,
    REVIEW_WINDOW_CHARS,
    TOOL_RESULT_CHARS,
    TrajectoryItem,
    render_trajectory,
)
from harness_store import Proposal
from harness_store.project_rules import ABOUT_KEY


@dataclass(frozen=True)
class Windows:
    """How much trajectory each call sees (characters) and how much of each tool result."""

    review_chars: int = REVIEW_WINDOW_CHARS
    planner_chars: int = PLANNER_WINDOW_CHARS
    tool_result_chars: int = TOOL_RESULT_CHARS


@dataclass(frozen=True)
class Plan:
    """The planner's answer: edits for the refinement's own scope, and those it marked for the
    project scope (None when it marked none; in a project refinement every edit is a project one)."""

    proposal: Proposal
    project: Proposal | None = None
    # The message id of the failed cell or gate the planner says its edits would have prevented (`fixes`
    # in its reply); None when it claims none. Checked against the transcript where it is used.
    fixes: str | None = None


def _fixes(data: dict[str, Any]) -> str | None:
    value = data.get("fixes")
    if isinstance(value, str) and value.strip() and len(value) <= 200:
        return value.strip()
    return None


def _project_edit(raw: dict[str, Any]) -> dict[str, Any]:
    """A raw project edit with its `about` paths carried in `metadata.about` (project_rules.py)."""
    about = raw.get(ABOUT_KEY)
    if about is None:
        return raw
    metadata = dict(raw["metadata"]) if isinstance(raw.get("metadata"), dict) else {}
    metadata[ABOUT_KEY] = about
    return {**raw, "metadata": metadata}


def split_plan(data: dict[str, Any], scope: Scope) -> Plan:
    """The planner's JSON as a `Plan`: an edit with `"scope": "project"` goes to the project part;
    any other scope value (or none) stays in the refinement's scope."""
    raw_edits = data.get("edits")
    edits = [e for e in raw_edits if isinstance(e, dict)] if isinstance(raw_edits, list) else []
    fixes = _fixes(data)
    if scope == "project":
        return Plan(
            Proposal.model_validate({**data, "edits": [_project_edit(e) for e in edits]}), fixes=fixes
        )
    own = [e for e in edits if e.get("scope") != "project"]
    marked = [_project_edit(e) for e in edits if e.get("scope") == "project"]
    project = Proposal.model_validate({**data, "edits": marked}) if marked else None
    return Plan(Proposal.model_validate({**data, "edits": own}), project, fixes)


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

    async def review(
        self, items: Sequence[TrajectoryItem], *, trigger_note: str, project: bool = False
    ) -> ReviewVerdict:
        """Ask whether this checkpoint deserves a refinement (`project`: the session has a project
        harness, so "project" is a scope it may answer). Parse failures raise ReplyParseError."""
        trajectory = render_trajectory(
            items, max_chars=self.windows.review_chars, tool_result_chars=self.windows.tool_result_chars
        )
        reply = await self.client.complete(
            system=REVIEW_SYSTEM_PROMPT,
            user=review_user_prompt(trajectory, trigger_note=trigger_note, project=project),
            max_tokens=self.budgets.review_max_tokens,
            schema=REVIEW_SCHEMA,
        )
        data = extract_json_object(reply.text, finish_reason=reply.finish_reason, reasoning=reply.reasoning)
        instructions = data.get("instructions")
        answered = data.get("scope")
        scope: Scope = (
            "global" if answered == "global" else "project" if answered == "project" and project else "local"
        )
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
        project: bool = False,
        entry_ids: Mapping[str, Sequence[str]] | None = None,
    ) -> Plan:
        """Write a proposal (`project`: the session has a project harness; the prompt says when an
        edit belongs there; `entry_ids`: kind -> the ids an update or delete may name, for the
        reply's schema). Parse failures raise ReplyParseError (truncated / invalid / none)."""
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
                project=project or scope == "project",
            ),
            max_tokens=self.budgets.planner_max_tokens,
            schema=plan_schema(entry_ids),
        )
        data = extract_json_object(reply.text, finish_reason=reply.finish_reason, reasoning=reply.reasoning)
        return split_plan(data, scope)
