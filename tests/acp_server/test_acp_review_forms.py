"""Reviews as elicitation forms, over real stdio, for a client that advertises `elicitation.form`.

The card is sent first, then `elicitation/create` tied to it; the form's answer decides the proposal
the way the permission card, `/review` and `_harness/review` do. A client without the capability
keeps the permission card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session, prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

FORMS = {"elicitation": {"form": {}}}
CREATE = (
    "harness.create('memory', 'Release steps', 'Release with tools/ship --sign.', id='release')\n"
    "harness.create('memory', 'Lint', 'Run make lint first.', id='lint')\n"
)


def _config(tmp_path: Path) -> str:
    path = tmp_path / "config.toml"
    path.write_text('refine_review = "always"\nauto_refine_every = 0\n')
    return str(path)


def _forms(client: AcpClient) -> list[dict[str, Any]]:
    return [m for m in client.agent_requests if m.get("method") == "elicitation/create"]


def _permissions(client: AcpClient) -> list[dict[str, Any]]:
    return [m for m in client.agent_requests if m.get("method") == "session/request_permission"]


def _memories(client: AcpClient, sid: str) -> dict[str, str]:
    state = client.request("_harness/state", {"sessionId": sid, "kind": "memory"})
    return {e["id"]: e["content"] for e in state["entries"]}


def _two_memories_proposed(client: AcpClient, model: ScriptedModelServer, sid: str) -> None:
    model.push(tool_call(CREATE), text("proposed"))
    assert prompt(client, sid, "remember how we release").stop_reason == "end_turn"


def test_forms_accept_one_proposal_rewritten_reject_the_other_and_no_permission_card_is_sent(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url, CONTINUAL_ACP_CONFIG=_config(tmp_path))
    seen: list[dict[str, Any]] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        fields = params["requestedSchema"]["properties"]
        content: dict[str, Any] = {"reason": "lint is not a release step"}
        for key, field in fields.items():
            if key.startswith("edit_") and not key.endswith("_text"):
                content[key] = "accept" if "release" in field["title"] else "reject"
            if key.endswith("_text") and "release" in field["title"]:
                content[key] = "Release with tools/ship --sign, never by hand."
        return {"action": "accept", "content": content}

    client.elicitation_policy = answer
    initialize(client, **FORMS)
    sid, _ = new_session(client, str(tmp_path))
    _two_memories_proposed(client, model, sid)
    model.push(text("ok"))
    assert prompt(client, sid, "next").stop_reason == "end_turn"
    assert len(_forms(client)) == 2 and _permissions(client) == []
    form = seen[0]
    assert form["mode"] == "form" and form["sessionId"] == sid
    card_id = form["toolCallId"]
    started = [u for u in client.updates(sid) if u.get("toolCallId") == card_id]
    assert started and started[0]["sessionUpdate"] == "tool_call", started  # the card came first
    assert _memories(client, sid) == {"release": "Release with tools/ship --sign, never by hand."}
    assert client.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 0


def test_a_declined_form_leaves_the_proposal_waiting(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url, CONTINUAL_ACP_CONFIG=_config(tmp_path))
    client.elicitation_policy = lambda params: {"action": "decline"}
    initialize(client, **FORMS)
    sid, _ = new_session(client, str(tmp_path))
    _two_memories_proposed(client, model, sid)
    model.push(text("ok"))
    assert prompt(client, sid, "next").stop_reason == "end_turn"
    assert _forms(client) and _memories(client, sid) == {}
    assert client.request("_harness/status", {"sessionId": sid})["awaitingReview"] >= 1


def test_a_held_control_plane_change_is_written_back_from_a_form(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    client.elicitation_policy = lambda params: {"action": "accept", "content": {"decision": "accept"}}
    initialize(client, **FORMS)
    cwd = tmp_path / "work"
    cwd.mkdir()
    sid, _ = new_session(client, str(cwd))
    gates = cwd / ".continual-acp" / "gates.toml"
    code = f"import os\nos.makedirs({str(gates.parent)!r}, exist_ok=True)\nopen({str(gates)!r}, 'w').write('x = 1\\n')\n"
    model.push(tool_call(code), text("wrote"))
    assert prompt(client, sid, "write the gates").stop_reason == "end_turn"
    assert not gates.exists()  # restored, held
    model.push(text("ok"))
    assert prompt(client, sid, "next").stop_reason == "end_turn"  # asks the held change by form
    assert _forms(client) and _permissions(client) == []
    assert gates.read_text() == "x = 1\n"


def test_a_client_without_forms_keeps_the_permission_card(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url, CONTINUAL_ACP_CONFIG=_config(tmp_path))
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    _two_memories_proposed(client, model, sid)
    model.push(text("ok"))
    assert prompt(client, sid, "next").stop_reason == "end_turn"
    assert _permissions(client) and _forms(client) == []
