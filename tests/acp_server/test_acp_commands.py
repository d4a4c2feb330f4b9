"""Slash commands answer with readable text; an unknown /word goes to the model; $/cancel_request."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from acp_client import AcpClient, server_env
from acp_helpers import initialize, new_session, run_command

from agent_core.testing.scripted_model import ScriptedModelServer, stall, text, tool_call


@pytest.fixture(scope="module")
def quiet_session(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[AcpClient, str, ScriptedModelServer]]:
    """One server and session shared by the read-only command tests below (none changes any state)."""
    root = tmp_path_factory.mktemp("quiet")
    (root / "home").mkdir()
    with ScriptedModelServer() as model:
        client = AcpClient(server_env(root / "home", model.base_url), cwd=str(root))
        try:
            initialize(client)
            sid, _ = new_session(client, root)
            yield client, sid, model
        finally:
            client.close()
        assert not client.garbage and not client.violations, (client.garbage, client.violations)


# Each of these commands answers from the harness alone: the model is never asked.
READ_ONLY_REPLIES = [
    ("/history", "No harness refinements yet."),
    ("/history lots", "/history takes a positive number of entries, not 'lots'. Usage: `/history [N]`"),
    ("/harness", "The harness is empty: no notes, memories, skills or subagents yet."),
    ("/rollback r-missing", "No refinement 'r-missing' in this session's or the global harness."),
    ("/rollback", "Usage: `/rollback <refinement-id> [--force]`"),
    ("/undo", "Nothing to undo: no applied harness refinement"),
    ("/review", "Nothing is waiting for review."),
    ("/kernel explode", "Unknown /kernel action 'explode'. Use `/kernel status`, `/kernel interrupt`"),
    ("/kernel keep forever", "Usage: `/kernel keep` (never hibernate this kernel) or `/kernel keep off`."),
]


@pytest.mark.parametrize(
    ("line", "reply_start"), READ_ONLY_REPLIES, ids=[line for line, _ in READ_ONLY_REPLIES]
)
def test_read_only_command_replies_without_the_model(
    quiet_session: tuple[AcpClient, str, ScriptedModelServer], line: str, reply_start: str
) -> None:
    client, sid, model = quiet_session
    assert run_command(client, sid, line).startswith(reply_start)
    assert model.requests == []


def test_refine_without_a_scripted_reply_fails_readably(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    reply = run_command(client, sid, "/refine be tidier")
    assert ") failed: " in reply
    assert "Nothing to undo" in run_command(client, sid, "/undo")  # it applied nothing


def test_refine_with_a_reply_that_is_not_json_says_why_once(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    model.push(text('{"summary": tidy the notes}'))
    reply = run_command(client, sid, "/refine be tidier")
    assert reply.count("not valid JSON") == 1
    assert "Refinement failed" not in reply


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
    assert reply.startswith("Context compacted")
    assert "Summary: we said hello." in reply


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
    cell = "note = harness.create('memory', 'Test command', 'Run `make check` first.')\nprint('refinement', note['id'])"
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
    listing = run_command(client, sid, "/harness")
    assert "Test command" in listing
    assert "### Use in prompts\n- `test_command`: never in a prompt yet" in listing  # written mid-turn
    # this turn's prompt carries the entry, and a cell follows it (runs its command)
    model.push(tool_call("print('make check')", title="Check"), text("ok"))
    run_command(client, sid, "anything else?")
    listing = run_command(client, sid, "/harness")
    assert "### Use in prompts\n- `test_command`: in the prompt for 1 turn, last " in listing
    why = run_command(client, sid, "/why test_command")
    assert "Use in prompts (local `test_command`): in the prompt for 1 turn" in why
    assert "Counters (local `test_command`): shown 1, followed 1 (1 passed, 0 failed) — helpful" in why
    state = client.request("_harness/state", {"sessionId": sid, "scope": "local"})
    assert state["entries"][0]["counters"]["followed"] == 1
    # the next prompt reads as a correction: the turn that followed the entry counts against it
    model.push(text("sorry"))
    run_command(client, sid, "No, that's not what I asked.")
    why = run_command(client, sid, "/why test_command")
    assert "shown 2, followed 1 (0 passed, 1 failed: 1 corrected by the user) — neutral" in why
    state = client.request("_harness/state", {"sessionId": sid, "scope": "local"})
    assert state["entries"][0]["counters"]["corrected"] == 1
    assert f"Rolled back {refinement_id}" in run_command(client, sid, "/undo")
    assert "Test command" not in run_command(client, sid, "/harness memory")
    assert "Nothing to undo" in run_command(client, sid, "/undo")
