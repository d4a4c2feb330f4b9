"""A harness `subagent` entry as a spawn spec: instructions, role and preferred model.

The entry's `content` is the instructions; `metadata.role` (else the title) the role and
`metadata.model` (or `metadata.preferred_model`) the preferred model. The session's local entry wins
over a global one with the same id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_core.subagents.session_port import SubagentSession


class SpecNotFound(LookupError):
    pass


@dataclass(frozen=True)
class Spec:
    """A subagent spec: the instructions a child starts with, its role and model."""

    id: str
    instructions: str
    role: str | None = None
    model: str | None = None


def resolve_spec(session: SubagentSession, spec_id: str) -> Spec:
    """The `subagent` entry `spec_id` of the session's harness (local first, then global)."""
    for store in (session.local_store, session.global_store):
        entry = store.load().get("subagent", spec_id)
        if entry is not None and getattr(entry, "trust", None) != "rejected":
            metadata = dict(getattr(entry, "metadata", {}) or {})
            model = metadata.get("model") or metadata.get("preferred_model")
            role = metadata.get("role") or entry.title
            return Spec(
                id=spec_id,
                instructions=entry.content,
                role=str(role) if role else None,
                model=str(model) if model else None,
            )
    raise SpecNotFound(
        f"no subagent spec {spec_id!r} in the harness; `harness.list('subagent')` lists the specs"
    )


def first_prompt(task: str, spec: Spec | None, name: str, parent_title: str | None) -> str:
    """The child's first prompt: a title line (the session's title comes from it), who it is, the
    spec's instructions (if any), then the task."""
    first_line = next((line.strip() for line in task.splitlines() if line.strip()), "")
    lines = [
        f"Subagent {name}: {first_line}",
        f"You are subagent `{name}`, started by another agent session"
        + (f" ({parent_title})" if parent_title else "")
        + ". Work on the task below on your own; your final answer is delivered to that agent "
        "automatically when your turn ends, so end with a short, complete answer.",
    ]
    if spec is not None:
        if spec.role:
            lines.append(f"Your role: {spec.role}.")
        lines.append(f"Instructions (subagent spec `{spec.id}`):\n{spec.instructions.strip()}")
    lines.append(f"Task:\n{task.strip()}")
    return "\n\n".join(lines)
