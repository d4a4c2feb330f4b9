"""Cancelling a slash command that asks the model (`/refine`, `/compact`), over real stdio.

The cancel must answer the prompt `cancelled` within 1 s, close the model request (the scripted model
counts the hang-up) and free the session, so the next prompt runs at once.
"""

from __future__ import annotations

import time
from pathlib import Path

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session, prompt, run_command, send_prompt

from agent_core.testing.script import usage
from agent_core.testing.scripted_model import ScriptedModelServer, stall, text
from agent_core.turn.compaction import SUMMARY_SYSTEM

CANCEL_CONTRACT_SECONDS = 1.0


def _cancel_while_stalled(
    client: AcpClient, sid: str, model: ScriptedModelServer, line: str, *, via_cancel_request: bool
) -> float:
    """Send `line`, wait until its model request is stalled, cancel; seconds until the `cancelled` answer."""
    asked = len(model.requests)
    model.push(stall(60))
    rid = send_prompt(client, sid, line)
    assert model.wait_for_requests(asked + 1, timeout=30)
    started = time.monotonic()
    if via_cancel_request:
        client.notify("$/cancel_request", {"requestId": rid})
    else:
        client.notify("session/cancel", {"sessionId": sid})
    assert client.result(rid, timeout=30)["stopReason"] == "cancelled"
    return time.monotonic() - started


def _three_turns(client: AcpClient, sid: str, model: ScriptedModelServer) -> None:
    model.push(text("hello"), text("again"), text("and again"))
    for words in ("hi", "hi again", "hi once more"):  # more than the 2 recent turns compaction keeps
        run_command(client, sid, words)


def test_session_cancel_stops_a_stalled_refine_within_a_second(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    elapsed = _cancel_while_stalled(client, sid, model, "/refine be tidier", via_cancel_request=False)
    assert elapsed < CANCEL_CONTRACT_SECONDS


def test_cancelled_refine_closes_its_model_request(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    _cancel_while_stalled(client, sid, model, "/refine", via_cancel_request=False)
    assert model.wait_for_disconnects(1, timeout=10)


def test_prompt_after_a_cancelled_refine_completes(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    _cancel_while_stalled(client, sid, model, "/refine", via_cancel_request=False)
    model.push(text("still here"))
    assert prompt(client, sid, "are you there?", timeout=30).stop_reason == "end_turn"


def test_cancel_request_stops_a_stalled_refine_within_a_second(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    elapsed = _cancel_while_stalled(client, sid, model, "/refine", via_cancel_request=True)
    assert elapsed < CANCEL_CONTRACT_SECONDS
    assert model.wait_for_disconnects(1, timeout=10)


def test_session_cancel_stops_a_stalled_compact_within_a_second(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    _three_turns(client, sid, model)
    elapsed = _cancel_while_stalled(client, sid, model, "/compact", via_cancel_request=False)
    assert elapsed < CANCEL_CONTRACT_SECONDS
    assert model.wait_for_disconnects(1, timeout=10)


def test_prompt_after_a_cancelled_compact_completes(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    _three_turns(client, sid, model)
    _cancel_while_stalled(client, sid, model, "/compact", via_cancel_request=True)
    model.push(text("still here"))
    assert prompt(client, sid, "are you there?", timeout=30).stop_reason == "end_turn"


def test_session_cancel_stops_a_stalled_automatic_compaction_inside_a_turn(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url, CONTINUAL_ACP_CONTEXT_WINDOW="100000")
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    # The third answer fills 90% of the window: the fourth turn compacts before its request.
    model.push(text("hello"), text("again"), text("and again", usage=usage(90_000, 10)))
    for words in ("hi", "hi again", "hi once more"):
        run_command(client, sid, words)
    elapsed = _cancel_while_stalled(client, sid, model, "and now?", via_cancel_request=False)
    assert model.requests[-1]["messages"][0]["content"] == SUMMARY_SYSTEM  # the summary request stalled
    assert elapsed < CANCEL_CONTRACT_SECONDS
    assert model.wait_for_disconnects(1, timeout=10)
