"""The per-task scripted model: what it answers depends on the harness section of what it is sent."""

from __future__ import annotations

import json
from typing import Any

from agent_core.refinement.prompts import PLANNER_SYSTEM_PROMPT, REVIEW_SYSTEM_PROMPT
from continual_eval.scripted import TaskModel, entries_in_prompt, harness_section, request_kind
from continual_eval.task import ScriptedBehaviour, bundled_suite, load_task
from harness_store.models import Edit
from harness_store.validation import validate_edit

BEHAVIOUR = ScriptedBehaviour(
    knows="./run-tests --fast",
    lesson_title="How tests run",
    lesson="Use ./run-tests --fast.",
    learned_from="Tests: run ./run-tests --fast",
    naive=("naive one", "naive two"),
    informed=("informed one",),
    answer="all done",
)
HARNESS = '# Harness\n## Continual harness\n\n### Memories\n- **How tests run** (candidate) [`m`]: "Use ./run-tests --fast."\n'


def _system(harness: str = "") -> str:
    return f"You are continual-acp.\n\n{harness}\n# Environment\nWorking directory: /x"


def _body(system: str, *rest: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "do it"}, *rest]}


def _code(reply: dict[str, Any]) -> str:
    call = next(
        e["tool_call"] for e in reply["events"] if "tool_call" in e and e["tool_call"].get("arguments")
    )
    return str(json.loads(call["arguments"])["code"])


def _text(reply: dict[str, Any]) -> str:
    return "".join(e.get("content", "") for e in reply["events"])


def test_without_the_lesson_in_the_harness_the_agent_plays_the_naive_cells_then_answers() -> None:
    model = TaskModel(BEHAVIOUR)
    assert _code(model(_body(_system()))) == "naive one"
    step = [{"role": "assistant", "content": None}, {"role": "tool", "content": "out"}]
    assert _code(model(_body(_system(), *step))) == "naive two"
    assert _text(model(_body(_system(), *step, *step))) == "all done"


def test_with_the_lesson_in_the_harness_section_the_agent_plays_the_informed_cells() -> None:
    model = TaskModel(BEHAVIOUR)
    assert _code(model(_body(_system(HARNESS)))) == "informed one"
    # The same words outside the harness section (e.g. the project's README in the prompt) do not count.
    elsewhere = "# Project context\nRun ./run-tests --fast\n"
    assert _code(model(_body(_system(elsewhere)))) == "naive one"


def test_harness_section_and_entry_count_read_only_the_harness() -> None:
    prompt = _system(HARNESS)
    assert "./run-tests --fast" in harness_section(prompt)
    assert "Working directory" not in harness_section(prompt)
    assert entries_in_prompt(prompt) == 1
    assert entries_in_prompt(_system()) == 0


def _planner(
    trajectory: str, harness: str = "(empty)", behaviour: ScriptedBehaviour = BEHAVIOUR
) -> dict[str, Any]:
    user = f"Current harness:\n{harness}\n\nTrajectory (most recent last; ids in square brackets):\n\n{trajectory}"
    body = {
        "messages": [{"role": "system", "content": PLANNER_SYSTEM_PROMPT}, {"role": "user", "content": user}]
    }
    assert request_kind(body) == "planner"
    return dict(json.loads(_text(TaskModel(behaviour)(body))))


def test_the_release_recipe_lesson_is_a_skill_calling_the_projects_release_function() -> None:
    behaviour = load_task(bundled_suite() / "release-recipe").scripted
    assert behaviour is not None
    seen = _planner(
        f"[u-1] user:\nRelease version 1.3.0.\n\n[c-2] cell result (error):\n{behaviour.learned_from}",
        behaviour=behaviour,
    )
    (raw,) = seen["edits"]
    edit = Edit.model_validate(raw)
    assert (edit.kind, edit.reference) == (
        "skill",
        {"type": "python", "import": "tools.release", "callable": "release"},
    )
    assert edit.arguments is not None and list(edit.arguments) == ["version"]
    assert validate_edit(edit) is None


def test_the_planner_writes_the_lesson_only_when_the_trajectory_shows_it_citing_a_message_id() -> None:
    seen = _planner("[u-1] user:\nfix it\n\n[c-2] cell result (ok):\nTests: run ./run-tests --fast")
    (edit,) = seen["edits"]
    assert (edit["action"], edit["kind"], edit["content"]) == ("create", "memory", "Use ./run-tests --fast.")
    assert edit["evidence"] == ["u-1"]
    assert _planner("[u-1] user:\nfix it\n\n[c-2] cell result (ok):\nall fine")["edits"] == []
    already = _planner(
        "[u-1] user:\nTests: run ./run-tests --fast", harness="How tests run: ./run-tests --fast"
    )
    assert already["edits"] == []


def test_the_review_gate_says_refine_when_the_trajectory_shows_the_lesson() -> None:
    def gate(trajectory: str) -> bool:
        body = {
            "messages": [
                {"role": "system", "content": REVIEW_SYSTEM_PROMPT},
                {"role": "user", "content": f"Trajectory:\n{trajectory}"},
            ]
        }
        assert request_kind(body) == "review"
        return bool(json.loads(_text(TaskModel(BEHAVIOUR)(body)))["should_refine"])

    assert gate("[c-1] cell result:\nTests: run ./run-tests --fast")
    assert not gate("[c-1] cell result:\nnothing here")
