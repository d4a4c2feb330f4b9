"""After `session/load`, every update that refers to a review card refers to one the replay sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session, prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call


def _hold(client: AcpClient, model: ScriptedModelServer, sid: str, cwd: Path, name: str) -> None:
    entry = cwd / ".continual-acp" / "harness" / "entries" / "prompt" / f"{name}.md"
    code = f"import os\nos.makedirs({str(entry.parent)!r}, exist_ok=True)\nopen({str(entry)!r}, 'w').write('x')\n"
    model.push(tool_call(code), text("wrote it"))
    assert prompt(client, sid, f"write {name}").stop_reason == "end_turn"


def _orphans(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Updates of a card (`tool_call_update`) whose `tool_call` never came before them."""
    started: set[str] = set()
    orphans = []
    for update in updates:
        kind, ident = update.get("sessionUpdate"), str(update.get("toolCallId", ""))
        if kind == "tool_call":
            started.add(ident)
        elif kind == "tool_call_update" and ident not in started:
            orphans.append(update)
    return orphans


def _updates_since(client: AcpClient, sid: str, seen: int) -> list[dict[str, Any]]:
    return [
        f.message["params"]["update"]
        for f in client.frames[seen:]
        if f.message.get("method") == "session/update" and f.message["params"]["sessionId"] == sid
    ]


def _cards_in_order(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    """Every card update in the order the client got them; a permission request's `toolCall` counts
    as the card's start (the client shows it from there)."""
    shown: list[dict[str, Any]] = []
    for f in client.frames:
        method, params = f.message.get("method"), f.message.get("params") or {}
        if method == "session/request_permission":
            shown.append({"sessionUpdate": "tool_call", **params["toolCall"]})
        elif method == "session/update" and params.get("sessionId") == sid:
            shown.append(params["update"])
    return shown


def test_a_review_decided_after_a_load_on_the_same_connection_updates_no_card_the_replay_did_not_send(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(cwd))
    _hold(client, model, sid, cwd, "one")
    cards = [u for u in client.updates(sid) if str(u.get("toolCallId", "")).startswith("review-")]
    proposal = str(cards[0]["rawInput"]["proposalId"])
    seen = len(client.frames)
    client.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})
    client.request("_harness/review", {"sessionId": sid, "proposalId": proposal, "decision": "reject"})
    model.push(text("ok"))
    assert prompt(client, sid, "go on").stop_reason == "end_turn"  # the harness events are delivered by now
    after = _updates_since(client, sid, seen)
    assert _orphans(after) == [], after


def test_a_review_still_waiting_after_a_load_is_asked_with_its_card_before_any_update_of_it(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    home = tmp_path / "home"
    first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(first)
    sid, _ = new_session(first, str(cwd))
    _hold(first, model, sid, cwd, "one")
    first.close()
    second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
    initialize(second)
    second.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})
    assert second.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 1
    model.push(text("ok"))
    assert prompt(second, sid, "continue").stop_reason == "end_turn"  # asks the waiting review first
    shown = _cards_in_order(second, sid)
    asked = [u for u in shown if str(u.get("toolCallId", "")).startswith("review-")]
    assert asked and asked[0]["sessionUpdate"] == "tool_call", asked
    assert _orphans(shown) == []
