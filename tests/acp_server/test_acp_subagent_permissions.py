"""A child's permission requests over real stdio, between its parent's turns: one real server (real
kernels, a scripted endpoint routing parent and children), one scenario run once for the module,
each test pinning one thing the client saw.

The scenario (ask mode; the client holds every permission request until the test answers it):
1. the parent's turn spawns `asker` and ends while asker's first cell (A) still waits for its answer;
2. A is answered, then asker's second cell (B) is asked -- the parent is in no turn -- and answered;
   asker finishes;
3. a second parent turn spawns `stuck`, whose first cell is asked; `/agents cancel stuck` while it
   still waits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from acp_client import AcpClient, Frame, server_env
from acp_helpers import initialize, new_session, run_command, send_prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

WAIT = 120.0
OPT_IN = {"continual-acp": {"quiescence": True}}
ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


@dataclass
class Seen:
    client: AcpClient
    sid: str
    asker_a: Frame  # asker's first permission request
    asker_b: Frame  # its second, asked between the parent's turns
    parent_ended_at: int  # seq of the first parent prompt's answer
    status_waiting: dict[str, Any]  # `_harness/status` while A waited
    stuck: Frame  # stuck's permission request
    cancel_reply: str


def permission(client: AcpClient, n: int) -> Frame:
    """The n-th `session/request_permission` the client received (1-based), waiting for it."""

    def nth(message: dict[str, Any]) -> bool:
        asked = [f for f in client.frames if f.message.get("method") == "session/request_permission"]
        return len(asked) >= n and message is asked[n - 1].message

    return client.wait_for(nth, WAIT)


def answer(client: AcpClient, frame: Frame) -> None:
    client.answer_permission(frame.message, ALLOW)


def subagent_state(update: dict[str, Any]) -> tuple[str, str] | None:
    info = update.get("_meta", {}).get("continual-acp", {}).get("subagent")
    return (
        None
        if info is None or update.get("sessionUpdate") == "session_info_update"
        else (info["name"], info["state"])
    )


def card_update(name: str, state: str) -> Any:
    def match(message: dict[str, Any]) -> bool:
        return message.get("method") == "session/update" and subagent_state(message["params"]["update"]) == (
            name,
            state,
        )

    return match


def cell(code: str) -> dict[str, Any]:
    return tool_call(code)


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seen]:
    cwd = tmp_path_factory.mktemp("asked")
    home = cwd / "home"
    home.mkdir()
    routes = {
        "[[asker]]": [cell("print('A ran')"), cell("print('B ran')"), text("asker done")],
        "[[stuck]]": [cell("print('never runs')"), text("stuck never answers")],
    }
    parent = [
        cell('await agents.spawn("[[asker]] run two cells", name="asker")'),
        text("spawned asker"),
        cell('await agents.spawn("[[stuck]] ask and wait", name="stuck")'),
        text("spawned stuck"),
    ]
    with ScriptedModelServer(parent, routes=routes) as model:
        client = AcpClient(server_env(home, model.base_url), cwd=str(cwd))
        try:
            initialize(client, _meta=OPT_IN)
            sid, _ = new_session(client, str(cwd))
            client.request(
                "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "ask"}
            )
            client.hold_permissions = True
            first = send_prompt(client, sid, "spawn asker")
            answer(client, permission(client, 1))  # the parent's own cell
            asker_a = permission(client, 2)
            ended = client.response_frame(first, WAIT)  # the parent's turn ends while A waits
            client.wait_for(card_update("asker", "needs-action"), WAIT)
            status_waiting = client.request("_harness/status", {"sessionId": sid})
            answer(client, asker_a)
            asker_b = permission(client, 3)
            answer(client, asker_b)
            client.wait_for(card_update("asker", "finished"), WAIT)
            second = send_prompt(client, sid, "spawn stuck")
            answer(client, permission(client, 4))
            stuck = permission(client, 5)
            client.response_frame(second, WAIT)
            reply = run_command(client, sid, "/agents cancel stuck")
            client.wait_for(card_update("stuck", "cancelled"), WAIT)
            yield Seen(client, sid, asker_a, asker_b, ended.seq, status_waiting, stuck, reply)
        finally:
            if client.proc.poll() is None:
                client.close()
    problems = [f"non-JSON on stdout: {line[:200]!r}" for line in client.garbage] + client.violations
    assert not problems, "\n".join(problems)


def updates_of(seen: Seen, tool_call_id: str) -> list[dict[str, Any]]:
    return [u for u in seen.client.updates(seen.sid) if u.get("toolCallId") == tool_call_id]


def test_a_childs_permission_request_between_the_parents_turns_reaches_the_editor_naming_the_child(
    seen: Seen,
) -> None:
    request = seen.asker_b.message["params"]
    assert seen.asker_b.seq > seen.parent_ended_at  # asked while the parent was in no turn
    assert request["sessionId"] == seen.sid
    assert request["toolCall"]["title"] == "[subagent asker] print('B ran')"
    named = request["_meta"]["continual-acp"]["subagent"]
    assert (named["name"], named["state"], named["parentSessionId"]) == ("asker", "needs-action", seen.sid)
    assert named["sessionId"].startswith("sess_") and named["sessionId"] != seen.sid


def test_a_childs_cell_card_stays_open_past_the_parents_turn_and_completes_when_the_cell_ran(
    seen: Seen,
) -> None:
    card_a = seen.asker_a.message["params"]["toolCall"]["toolCallId"]
    card_b = seen.asker_b.message["params"]["toolCall"]["toolCallId"]
    statuses_a = [u.get("status") for u in updates_of(seen, card_a) if u.get("status")]
    assert "failed" not in statuses_a  # the parent's turn ending did not close it as "not run"
    assert statuses_a[-1] == "completed"
    last_b = updates_of(seen, card_b)[-1]
    assert last_b["status"] == "completed"
    assert "B ran" in json.dumps(last_b["content"])


def test_a_child_waiting_for_its_permission_answer_needs_action_on_its_card_status_and_mirror(
    seen: Seen,
) -> None:
    assert seen.status_waiting["subagentsNeedingAction"] == ["asker"]
    mirrors = [
        u["_meta"]["continual-acp"]["quiescence"]["background"]
        for u in seen.client.updates(seen.sid)
        if u.get("sessionUpdate") == "session_info_update"
        and "quiescence" in u.get("_meta", {}).get("continual-acp", {})
    ]
    assert [("asker", "needs-action")] in [[(b["name"], b["state"]) for b in m] for m in mirrors]


def test_the_quiescence_notification_is_sent_again_when_the_background_children_settle(seen: Seen) -> None:
    frames = seen.client.frames
    finished = next(f.seq for f in frames if card_update("asker", "finished")(f.message))
    notes = [
        (f.seq, f.message["params"])
        for f in frames
        if f.message.get("method") == "_harness/quiescence" and f.message["params"]["sessionId"] == seen.sid
    ]
    assert any(seq < finished and not p["quiescent"] for seq, p in notes)  # while asker ran
    after = [p for seq, p in notes if seq > finished]
    assert after and after[0]["quiescent"] is True


def test_cancelling_a_child_that_waits_for_permission_cancels_the_request_and_closes_its_card(
    seen: Seen,
) -> None:
    assert "Cancelled subagent `stuck`" in seen.cancel_reply
    request_id = seen.stuck.message["id"]
    seen.client.wait_for(
        lambda m: m.get("method") == "$/cancel_request" and m["params"]["requestId"] == request_id, WAIT
    )
    card = seen.stuck.message["params"]["toolCall"]["toolCallId"]
    seen.client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"].get("toolCallId") == card
            and m["params"]["update"].get("status") in ("failed", "completed")
        ),
        WAIT,
    )
    assert updates_of(seen, card)[-1]["status"] == "failed"
