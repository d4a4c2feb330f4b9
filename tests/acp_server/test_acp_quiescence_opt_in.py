"""`_harness/quiescence` goes only to a client that opted in; every client gets the mirror."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session, run_command

from agent_core.testing.scripted_model import ScriptedModelServer, text

OPT_IN = {"continual-acp": {"quiescence": True}}
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


def undo_and_settle(client: AcpClient, model: ScriptedModelServer, tmp_path: Path) -> str:
    """Apply one refinement (`/refine`), roll it back (`/undo`) and wait until the session settles."""
    model.push(text(json.dumps(PLAN)))
    sid, _ = new_session(client, str(tmp_path))
    run_command(client, sid, "/refine remember the test command")
    run_command(client, sid, "/undo")
    result = client.request("_harness/await_quiescence", {"sessionId": sid, "timeoutMs": 30_000})
    assert result["quiescent"] is True
    return sid


def mirrors(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return [
        u["_meta"]["continual-acp"]["quiescence"]
        for u in client.updates(sid)
        if u["sessionUpdate"] == "session_info_update" and "continual-acp" in (u.get("_meta") or {})
    ]


def quiescence_notifications(client: AcpClient) -> list[dict[str, Any]]:
    return [f.message["params"] for f in client.frames if f.message.get("method") == "_harness/quiescence"]


def test_a_client_that_opts_in_gets_the_quiescence_notification(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client, _meta=OPT_IN)
    sid = undo_and_settle(client, model, tmp_path)
    sent = quiescence_notifications(client)
    assert sent and sent[-1]["sessionId"] == sid and sent[-1]["quiescent"] is True


def test_a_client_that_does_not_opt_in_never_gets_the_notification(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client)
    undo_and_settle(client, model, tmp_path)
    assert quiescence_notifications(client) == []


def test_a_client_that_does_not_opt_in_still_gets_the_session_info_mirror(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client)
    sid = undo_and_settle(client, model, tmp_path)
    states = mirrors(client, sid)
    assert states and states[-1]["quiescent"] is True


def test_a_false_or_malformed_opt_in_counts_as_not_asked(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client, _meta={"continual-acp": {"quiescence": "yes"}})
    undo_and_settle(client, model, tmp_path)
    assert quiescence_notifications(client) == []


def test_the_mirror_lists_running_work_while_busy_and_an_empty_list_once_settled(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client = spawn(model.base_url)
    initialize(client)
    sid = undo_and_settle(client, model, tmp_path)
    states = mirrors(client, sid)
    busy = [s for s in states if not s["quiescent"]]
    assert busy and all(s["background"] for s in busy)
    assert busy[0]["background"][0]["type"] == "refinement"
    assert states[-1]["background"] == []
