"""`editor.ask(question, choices=...)` from a real cell, as an elicitation form over real stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_helpers import ClientFactory, initialize, new_session, prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

FORMS = {"elicitation": {"form": {}}}


def _ask(model: ScriptedModelServer, code: str) -> None:
    model.push(tool_call(code), text("asked"))


def _cell_output(model: ScriptedModelServer) -> str:
    return str(model.requests[-1]["messages"][-1]["content"])


def test_a_cell_asks_the_user_a_choice_and_gets_the_answer(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    asked: list[dict[str, Any]] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"answer": "not yet"}}

    client.elicitation_policy = answer
    initialize(client, **FORMS)
    sid, _ = new_session(client, str(tmp_path))
    _ask(
        model,
        "r = await editor.ask('Release now?', choices=['yes', 'not yet'])\nprint(r['status'], r['answer'])",
    )
    assert prompt(client, sid, "ask me").stop_reason == "end_turn"
    assert "answered not yet" in _cell_output(model)
    field = asked[0]["requestedSchema"]["properties"]["answer"]
    assert asked[0]["message"] == "Release now?" and [o["const"] for o in field["oneOf"]] == [
        "yes",
        "not yet",
    ]


def test_a_declined_question_and_one_the_client_cannot_show_say_so(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    client.elicitation_policy = lambda params: {"action": "decline"}
    initialize(client, **FORMS)
    sid, _ = new_session(client, str(tmp_path))
    _ask(model, "print(editor.ask('Which branch?')['status'])")
    assert prompt(client, sid, "ask me").stop_reason == "end_turn"
    assert "declined" in _cell_output(model)
    plain = spawn(model.base_url)
    initialize(plain)
    other, _ = new_session(plain, str(tmp_path))
    _ask(model, "print(editor.ask('Which branch?')['status'])")
    assert prompt(plain, other, "ask me").stop_reason == "end_turn"
    assert "unsupported" in _cell_output(model)
    assert not [m for m in plain.agent_requests if m.get("method") == "elicitation/create"]


def test_an_unanswered_question_times_out_and_the_cell_goes_on(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    client.elicitation_policy = lambda params: {"action": "accept", "content": {"answer": "late"}}
    client.hold_permissions = True  # the form is never answered
    initialize(client, **FORMS)
    sid, _ = new_session(client, str(tmp_path))
    _ask(model, "print(editor.ask('Anyone there?', timeout=1)['status'])")
    assert prompt(client, sid, "ask me").stop_reason == "end_turn"
    assert "timeout" in _cell_output(model)


def test_a_malformed_question_is_an_error_in_the_cell(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client, **FORMS)
    sid, _ = new_session(client, str(tmp_path))
    _ask(model, "editor.ask('pick', choices=[])")
    assert prompt(client, sid, "ask me").stop_reason == "end_turn"
    assert "`choices` must be a non-empty list" in _cell_output(model)
