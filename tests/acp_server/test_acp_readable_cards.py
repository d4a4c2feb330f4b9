"""Cards and messages that read well in clients that show text literally or ignore `messageId`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, new_session, prompt, run_command

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

PLAN = {
    "summary": "Remember the test command",
    "rationale": "stated by the user",
    "expected_outcome": "x",
    "edits": [
        {
            "action": "create",
            "kind": "memory",
            "id": "test_command",
            "title": "Test command",
            "content": "Run `make check`.",
            "evidence": [],
        }
    ],
}


def start(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path, client_name: str
) -> tuple[AcpClient, str]:
    client = spawn(model.base_url)
    client.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {},
            "clientInfo": {"name": client_name, "version": "19.22.0"},
        },
    )
    sid, _ = new_session(client, str(tmp_path))
    return client, sid


def refinement_card(
    client: AcpClient, sid: str, tmp_path: Path, model: ScriptedModelServer
) -> dict[str, Any]:
    model.push(text(json.dumps(PLAN)))
    run_command(client, sid, "/refine remember the test command")
    [card] = [
        u
        for u in client.updates(sid)
        if u["sessionUpdate"] == "tool_call" and u["toolCallId"].startswith("refinement-")
    ]
    return card


def all_message_text(client: AcpClient, sid: str) -> str:
    """Every agent message chunk joined in order, as a client that ignores `messageId` shows them."""
    return "".join(
        u["content"]["text"] for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"
    )


def test_a_client_that_titles_edit_cards_by_path_gets_a_refinement_card_without_diff_paths(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client, sid = start(spawn, model, tmp_path, "CodeCompanion.nvim")
    card = refinement_card(client, sid, tmp_path, model)
    assert card["title"] == "Refine harness - Remember the test command"
    assert [c["type"] for c in card["content"]] == ["content", "content"]
    assert card["content"][0]["content"]["text"] == card["title"]
    shown = card["content"][1]["content"]["text"]
    assert shown.startswith("```diff\n") and "+Run `make check`." in shown
    assert "locations" not in card


def test_other_clients_keep_the_diff_content_and_the_colon_title(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client, sid = start(spawn, model, tmp_path, "zed")
    card = refinement_card(client, sid, tmp_path, model)
    assert card["title"] == "Refine harness: Remember the test command"
    assert [c["type"] for c in card["content"]] == ["diff"]


def test_a_message_after_a_tool_call_starts_a_new_paragraph(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(
        tool_call("print(42)", title="print", text="I will run it in the kernel."),
        text("The kernel printed 42."),
    )
    client, sid = start(spawn, model, tmp_path, "toad")
    assert prompt(client, sid, "run it")[0] == "end_turn"
    assert "I will run it in the kernel.\n\nThe kernel printed 42." in all_message_text(client, sid)


def test_the_first_message_of_a_turn_has_no_leading_blank_line(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text("Hello."))
    client, sid = start(spawn, model, tmp_path, "toad")
    assert prompt(client, sid, "hi")[0] == "end_turn"
    assert all_message_text(client, sid) == "Hello."


def test_the_undo_reply_does_not_run_into_the_refinement_message(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client, sid = start(spawn, model, tmp_path, "toad")
    refinement_card(client, sid, tmp_path, model)
    run_command(client, sid, "/undo")
    shown = all_message_text(client, sid)
    rolled = shown.index("Rolled back")
    assert shown[rolled - 2 : rolled] == "\n\n", repr(shown[max(0, rolled - 80) : rolled + 20])


def test_a_first_message_after_a_card_has_no_leading_blank_line(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(tool_call("print(42)", title="print"), text("The kernel printed 42."))
    client, sid = start(spawn, model, tmp_path, "toad")
    assert prompt(client, sid, "run it")[0] == "end_turn"
    assert all_message_text(client, sid) == "The kernel printed 42."


def test_a_client_that_titles_edit_cards_by_path_is_asked_about_a_review_card_without_diff_paths(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client, sid = start(spawn, model, tmp_path, "CodeCompanion.nvim")
    client.request(
        "session/set_config_option", {"sessionId": sid, "configId": "refine_review", "value": "always"}
    )
    model.push(text(json.dumps(PLAN)))
    run_command(client, sid, "/refine remember the test command")
    [asked] = [
        r["params"]["toolCall"] for r in client.agent_requests if r["method"] == "session/request_permission"
    ]
    assert asked["title"] == "Refine harness - Remember the test command"
    assert [c["type"] for c in asked["content"]] == ["content", "content"]
    assert asked["content"][0]["content"]["text"] == asked["title"]
    assert asked["content"][1]["content"]["text"].startswith("```diff\n")
