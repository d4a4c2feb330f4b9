"""The words the review gate and the planner are given.

Both calls see the conversation with message ids. The gate answers one cheap question (is there
something durable to learn here?); the planner writes the proposal. Both must answer with a single
JSON object; the parsing side (extract.py) is tolerant of fences and prose around it.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_core.refinement.records import Scope

REVIEW_SYSTEM_PROMPT = """\
You review a coding agent's recent work and decide whether its continual harness should be refined now.

The harness is the agent's durable, editable layer of state: prompt notes, memories (facts, decisions,
preferences, failures worth remembering), Python skills, and subagent specs. Refining it is worth it only
for something that will matter again: a repeated failure, a reusable tactic, a stated user preference, a
project convention, a role worth delegating to. Say no to one-off noise, to guesses the conversation does
not support, and to anything already in the harness.

Answer with one JSON object and nothing else:
{"should_refine": true|false, "rationale": "<one or two sentences>", "instructions": "<what the planner should capture, optional>", "scope": "local"|"global"}
Use scope "local" (this session only) unless the lesson clearly holds across projects and sessions.
"""

PLANNER_SYSTEM_PROMPT = """\
You refine a coding agent's continual harness from its own trajectory. You emit precise edits to the
harness, never a summary of the conversation.

Kinds of entry:
- prompt: a supplemental prompt note (the base system prompt itself is immutable; never target id base_system_prompt)
- memory: a durable fact, decision, preference or failure worth remembering
- skill: a callable Python skill; needs "reference": {"type": "python", "import": "<module>", "callable": "<name>"} and "arguments" (an object describing its parameters; {} is fine)
- subagent: a delegation spec (role, when to use it, instructions)

Rules:
- Propose only what the trajectory supports, and cite it: "evidence" is a list of the message ids shown
  in square brackets in the trajectory (for example ["m-12", "cell-3"]).
- Prefer updating an existing entry over creating a near-duplicate; delete entries the trajectory proves wrong.
- Keep entries short and specific; a title of a few words; content that a future agent can act on.
- An empty "edits" list is a valid answer when nothing is worth keeping.
- Optionally state a prediction: the command a later cell will run when the situation recurs and what
  you expect then ("prediction": {"command": "make check", "expect": "the tests pass"}); it is checked.
- If the edits would have prevented a cell or gate that failed, name its id in "fixes" (for example
  "cell-3"); the claim may be checked by replaying the task with and without the edits.

Answer with one JSON object and nothing else:
{"summary": "<a short line>", "rationale": "<why>", "expected_outcome": "<what gets better>",
 "prediction": {"command": "<what a later cell runs>", "expect": "<what then>"},
 "fixes": "<id of the failed cell or gate the edits would have prevented, optional>",
 "edits": [{"action": "create"|"update"|"delete", "kind": "prompt"|"memory"|"skill"|"subagent",
            "id": "<existing id, for update/delete>", "title": "...", "content": "...", "path": "<group, optional>",
            "reference": {...}, "arguments": {...}, "reason": "...", "evidence": ["<message id>", ...]}]}
"""


# what the planner is told about the project scope, and the rule the project
# store enforces on what it writes there (harness_store/project_rules.py).
PROJECT_RULE = """\
Project scope: this session works in a git repository whose project harness is committed with its code
and shared by everyone who works on it. Put an edit there by giving it "scope": "project" -- only for a
fact about this repository (its build and test commands, layout, conventions, pitfalls in its code),
never for a personal preference or a lesson that holds in other projects. A project create or update
must cite evidence and name in "about" the repository paths it concerns (relative to the repository
root, existing now, for example ["Makefile"] or ["src/api/"]); an edit that does not is refused. Every
project edit is reviewed by the user before it lands."""


def scope_policy(scope: Scope, *, project: bool = False) -> str:
    """The scope section of the planner's prompt; `project`: the session has a project harness."""
    if scope == "project":
        return (
            "Scope: PROJECT. These edits are committed to this repository for everyone who works on it.\n"
            + PROJECT_RULE
        )
    if scope == "global":
        text = (
            "Scope: GLOBAL. These edits persist across every future session and project; only lessons that "
            "clearly generalise belong here."
        )
    else:
        text = (
            "Scope: LOCAL. These edits belong to this session only. Global entries are read-only here: do not "
            "update or delete them (a global change needs a global refinement)."
        )
    return f"{text}\n{PROJECT_RULE}" if project else text


REVIEW_PROJECT_NOTE = (
    'This session works in a git repository: answer scope "project" when the lesson is a fact about '
    "this repository (its commands, layout, conventions), to be committed with its code after the user "
    "reviews it; never for a personal preference or a lesson that holds elsewhere."
)


def review_user_prompt(trajectory: str, *, trigger_note: str, project: bool = False) -> str:
    """The review gate's user message; `project`: the session has a project harness."""
    note = f"{REVIEW_PROJECT_NOTE}\n\n" if project else ""
    return (
        f"Checkpoint: {trigger_note}\n\n"
        f"{note}"
        f"Trajectory (most recent last; ids in square brackets):\n\n{trajectory}\n\n"
        "Should the harness be refined now? Answer with the JSON object only."
    )


def planner_user_prompt(
    *,
    overview: str,
    history: Sequence[str],
    trajectory: str,
    scope: Scope,
    instructions: str | None,
    project: bool = False,
) -> str:
    """The planner's user message; `project`: the session has a project harness."""
    recent = "\n".join(f"- {line}" for line in history) if history else "(none yet)"
    parts = [
        f"Current harness:\n{overview.strip() or '(empty)'}",
        f"Recent refinements (newest last):\n{recent}",
        scope_policy(scope, project=project),
    ]
    if instructions:
        parts.append(f"Instructions for this refinement:\n{instructions.strip()}")
    parts.append(f"Trajectory (most recent last; ids in square brackets):\n\n{trajectory}")
    parts.append("Write the proposal as one JSON object.")
    return "\n\n".join(parts)
