"""The scripted model of a task: replies computed from what the request holds (a pipeline test).

It answers the three kinds of request the server makes, told apart by their system prompt:

* a **turn** of the agent: if the system prompt's harness section (or a user message: a correction
  the prompt gives) holds the task's `knows` text, the `informed` cells, else the `naive` ones, one
  cell per request, then the answer;
* the **review gate**: refine when the trajectory holds the task's `learned_from` text;
* the **planner**: the task's lesson (a memory, or a skill when the task says so), citing the first
  message id of the trajectory, when the trajectory holds `learned_from` and the current harness
  does not hold `knows` yet.

So the numbers a scripted run produces show the machinery (session 1's refinement writes the lesson,
session 2's prompt carries it, the checker and the step count follow), never a model's quality.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agent_core.testing.script import Response, text, tool_call
from continual_eval.task import ScriptedBehaviour

PLANNER_MARK = "You refine a coding agent's continual harness"
REVIEW_MARK = "You review a coding agent's recent work"
MESSAGE_ID = re.compile(r"^\[([^\]\s]+)\] (?:user|assistant|cell result)", re.MULTILINE)


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def harness_section(system_prompt: str) -> str:
    """The `# Harness` section of a system prompt ("" when the harness is empty)."""
    match = re.search(r"^# Harness\n(.*?)(?=^# |\Z)", system_prompt, re.DOTALL | re.MULTILINE)
    return match.group(1) if match else ""


def entries_in_prompt(system_prompt: str) -> int:
    """How many harness entries the prompt shows (one `- **title**` line each)."""
    return sum(1 for line in harness_section(system_prompt).splitlines() if line.startswith("- **"))


def request_kind(body: Mapping[str, Any]) -> str:
    """`turn`, `review` or `planner`, from the request's system prompt."""
    messages = body.get("messages") or []
    system = _content(messages[0]) if messages and messages[0].get("role") == "system" else ""
    if system.startswith(PLANNER_MARK):
        return "planner"
    if system.startswith(REVIEW_MARK):
        return "review"
    return "turn"


def _cells_done(messages: Sequence[Mapping[str, Any]]) -> int:
    """Assistant messages since the last user message: the cells this turn has run so far."""
    count = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        if message.get("role") == "assistant":
            count += 1
    return count


def _planner_reply(behaviour: ScriptedBehaviour, prompt: str) -> Response:
    harness, _, trajectory = prompt.partition("Trajectory (most recent last")
    evidence = MESSAGE_ID.findall(trajectory)
    if behaviour.learned_from in trajectory and behaviour.knows not in harness and evidence:
        edit: dict[str, Any] = {
            "action": "create",
            "kind": behaviour.lesson_kind,
            "title": behaviour.lesson_title,
            "content": behaviour.lesson,
            "reason": "the session found this out the slow way",
            "evidence": [evidence[0]],
        }
        if behaviour.lesson_kind == "skill":
            edit["reference"] = {"type": "python", **(behaviour.lesson_reference or {})}
            edit["arguments"] = dict(behaviour.lesson_arguments or {})
            if behaviour.lesson_examples:
                edit["examples"] = [dict(e) for e in behaviour.lesson_examples]
        plan = {
            "summary": f"remember: {behaviour.lesson_title}",
            "rationale": "the trajectory shows it",
            "expected_outcome": "the next session does it right the first time",
            "edits": [edit],
        }
    else:
        plan = {"summary": "nothing new", "rationale": "nothing durable", "expected_outcome": "", "edits": []}
    return text(json.dumps(plan))


class TaskModel:
    """The responder for `ScriptedModelServer(responder=...)` playing one task."""

    def __init__(self, behaviour: ScriptedBehaviour) -> None:
        self.behaviour = behaviour

    def __call__(self, body: dict[str, Any]) -> Response:
        messages = body.get("messages") or []
        kind = request_kind(body)
        last_user = next((_content(m) for m in reversed(messages) if m.get("role") == "user"), "")
        if kind == "planner":
            return _planner_reply(self.behaviour, last_user)
        if kind == "review":
            should = self.behaviour.learned_from in last_user
            return text(json.dumps({"should_refine": should, "rationale": "scripted", "scope": "global"}))
        system = _content(messages[0]) if messages else ""
        # Informed by the harness, or told in the prompt (a correction the user gives in session 1).
        told = any(self.behaviour.knows in _content(m) for m in messages if m.get("role") == "user")
        informed = self.behaviour.knows in harness_section(system) or told
        cells = self.behaviour.informed if informed else self.behaviour.naive
        done = _cells_done(messages)
        if done < len(cells):
            return tool_call(cells[done], title=f"step {done + 1}")
        return text(self.behaviour.answer)
