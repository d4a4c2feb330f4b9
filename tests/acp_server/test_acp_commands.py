"""Slash commands answer with readable text; an unknown /word goes to the model; $/cancel_request."""

from __future__ import annotations

import re

from acp_client import AcpClient
from acp_helpers import run_command

from agent_core.testing.scripted_model import ScriptedModelServer, stall, text, tool_call


def test_harness_commands_reply_with_readable_text(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    assert "No harness refinements yet" in run_command(client, sid, "/history")
    assert "number" in run_command(client, sid, "/history lots")
    assert run_command(client, sid, "/harness").strip()
    assert "No refinement 'r-missing'" in run_command(client, sid, "/rollback r-missing")
    assert "Usage: `/rollback" in run_command(client, sid, "/rollback")
    assert "Nothing to undo" in run_command(client, sid, "/undo")
    assert "Nothing is waiting for review" in run_command(client, sid, "/review")
    assert model.requests == []  # none of these needed the model
    # /refine is the one that does: with nothing scripted, it fails readably (and applies nothing).
    assert "Refinement failed" in run_command(client, sid, "/refine be tidier")


def test_kernel_commands_report_status_and_restart(session: tuple[AcpClient, str]) -> None:
    client, sid = session
    assert run_command(client, sid, "/kernel status").strip()
    assert "nothing to interrupt" in run_command(client, sid, "/kernel interrupt").lower()
    assert "restarted" in run_command(client, sid, "/kernel restart").lower()
    assert "Unknown /kernel action" in run_command(client, sid, "/kernel explode")


def test_unknown_slash_word_goes_to_the_model_as_text(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    model.push(text("I do not know that command."))
    assert run_command(client, sid, "/frobnicate the widgets") == "I do not know that command."
    assert "/frobnicate the widgets" in str(model.requests[-1]["messages"])


def test_compact_replies_with_the_summary(session: tuple[AcpClient, str], model: ScriptedModelServer) -> None:
    client, sid = session
    model.push(text("hello"), text("again"), text("and again"), text("Summary: we said hello."))
    for words in ("hi", "hi again", "hi once more"):  # more than the 2 recent turns compaction keeps
        run_command(client, sid, words)
    reply = run_command(client, sid, "/compact keep it short")
    assert reply.startswith("Context compacted") and "Summary: we said hello." in reply


def test_cancel_request_for_a_prompt_answers_it_cancelled(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    model.push(stall(60, before="thinking..."))
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stall"}]}
    )
    client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
    )
    client.notify("$/cancel_request", {"requestId": rid})
    assert client.result(rid, timeout=10)["stopReason"] == "cancelled"


def test_autonomous_command_switches_the_mode_and_announces_it(session: tuple[AcpClient, str]) -> None:
    client, sid = session
    assert "off" in run_command(client, sid, "/autonomous status")
    run_command(client, sid, "/autonomous gate add true")  # it never runs without a gate
    assert "Autonomous mode is on" in run_command(client, sid, "/autonomous on")
    client.wait_for(
        lambda m: (
            m.get("method") == "session/update" and m["params"]["update"].get("currentModeId") == "autonomous"
        )
    )
    options = client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "config_option_update"
        )
    )
    modes = [o for o in options.message["params"]["update"]["configOptions"] if o["id"] == "mode"]
    assert modes[0]["currentValue"] == "autonomous"
    assert "(mode: auto)" in run_command(client, sid, "/autonomous off")


def test_history_lists_a_refinement_made_in_a_cell_and_undo_rolls_it_back(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    cell = "note = harness.create('memory', 'Test command', 'Run make check first.')\nprint('refinement', note['id'])"
    model.push(tool_call(cell, title="Remember the test command"), text("noted"))
    reply = run_command(client, sid, "remember how to test")
    assert reply.endswith("noted") and "Undo it with `/rollback r-" in reply
    refinement_id = re.search(r"refinement (r-[0-9a-f-]+)", str(client.updates(sid))).group(1)  # type: ignore[union-attr]
    card = client.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("kind") == "edit"
    ).message["params"]["update"]
    assert card["title"].startswith("Refine harness:") and refinement_id in card["toolCallId"]
    history = run_command(client, sid, "/history")
    assert refinement_id in history and "Last 1 harness refinement " in history
    assert "Test command" in run_command(client, sid, "/harness")
    assert f"Rolled back {refinement_id}" in run_command(client, sid, "/undo")
    assert "Test command" not in run_command(client, sid, "/harness memory")
    assert "Nothing to undo" in run_command(client, sid, "/undo")
