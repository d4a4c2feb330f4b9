"""Refinement end to end over real stdio: the real server, the real store, the scripted model.

One server per configuration (reviews every turn; `/refine` only), each with its own scripted
endpoint, serves the tests that need only a fresh session (`served`): each opens its own session in
its own folder (a session's local store is its own), reads only the requests, agent requests and
frames since it began, and at its end waits for its session's refinement to settle, closes it and
drops what is left of the script. None of them writes the global store or its history, which all
sessions of a server share: the tests that do (a refused global write is recorded too), and those
that start a second process, keep their own servers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_core.testing.scripted_model import ScriptedModelServer, length_cut, response, text

from .acp_support import (
    AcpClient,
    Frame,
    RpcError,
    Servers,
    messages_between,
    new_session,
    notifications,
    plan_json,
    prompt,
    refinement_cards,
    select,
    servers,
)
from .conftest import gate_reply, memory_edit

# trust: SKILL imports a module that does not exist; these tests are about review, not checks.
AUTO_EVERY_TURN = "auto_refine_every = 1\nrefine_cooldown_seconds = 0\nverify_skills = false\n"
MANUAL_ONLY = "auto_refine_every = 0\n"

SKILL = {
    "action": "create",
    "kind": "skill",
    "id": "run_checks",
    "title": "Run checks",
    "content": "Runs `make check` and returns its exit code.",
    "reference": {"type": "python", "import": "project_tools.checks", "callable": "run_checks"},
    "arguments": {},
}
MEMORY_TEXT = "Run `make check`, not bare pytest."


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


# ---------------------------------------------------------------- one server per configuration


@dataclass
class Here:
    """One test on a shared server: its session, and where the shared logs stood when it began."""

    model: ScriptedModelServer
    client: AcpClient
    sid: str
    requests_at: int
    frames_at: int
    asked_at: int

    def requests(self) -> list[dict[str, Any]]:
        return self.model.requests[self.requests_at :]

    def agent_requests(self) -> list[dict[str, Any]]:
        return self.client.agent_requests[self.asked_at :]

    def _mine(self, message: dict[str, Any]) -> bool:
        return bool(message.get("params", {}).get("sessionId") == self.sid)

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> Frame:
        """The first matching message about this test's session since it began."""
        return self.client.wait_for_after(self.frames_at, lambda m: self._mine(m) and predicate(m), timeout)

    def notifications(self, method: str) -> list[Frame]:
        return [
            f for f in notifications(self.client, method) if f.seq > self.frames_at and self._mine(f.message)
        ]

    def update_frames(self, kind: str) -> list[Frame]:
        return [
            f for f in self.client.update_frames(kind) if f.seq > self.frames_at and self._mine(f.message)
        ]


class Shared:
    """The servers of the module, one per configuration, each with its own scripted endpoint."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._served: dict[str, tuple[ScriptedModelServer, Servers, AcpClient]] = {}

    def get(self, config: str) -> tuple[ScriptedModelServer, AcpClient]:
        if config not in self._served:
            model = ScriptedModelServer().start()
            home = self._factory.mktemp("refinement-home")
            group = Servers(home, model.base_url, config=config)
            self._served[config] = (model, group, group.spawn(home))
        model, _, client = self._served[config]
        return model, client

    def close(self) -> list[str]:
        problems: list[str] = []
        for model, group, _ in self._served.values():
            problems += group.close()
            model.stop()
        return problems


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    made = Shared(tmp_path_factory)
    try:
        yield made
    finally:
        problems = made.close()
    assert not problems, "\n".join(problems)


Serve = Callable[[str], Here]


@pytest.fixture
def served(shared: Shared, tmp_path: Path) -> Iterator[Serve]:
    """This test's session in `tmp_path` on the shared server of a configuration."""
    opened: list[Here] = []

    def serve(config: str) -> Here:
        model, client = shared.get(config)
        at = (len(model.requests), len(client.frames), len(client.agent_requests))
        sid, _ = new_session(client, tmp_path)
        here = Here(model, client, sid, *at)
        opened.append(here)
        return here

    try:
        yield serve
    finally:
        for here in opened:
            client = here.client
            try:  # a review still running would take the next test's script
                client.request("_harness/await_quiescence", {"sessionId": here.sid, "timeoutMs": 30_000})
                client.request("session/close", {"sessionId": here.sid}, timeout=30)
            except Exception:  # a broken session must not hide the test's own failure
                pass
            client.permission_policy = select("allow_once")
            client.hold_permissions = False
            here.model.clear_script()


def _latest_turn_system_prompt(requests: list[dict[str, Any]]) -> str:
    """The system prompt of the agent's latest turn request: the one call that offers tools (the
    review gate and the planner are plain calls), however many gate and planner calls came between."""
    turns = [body for body in requests if body.get("tools")]
    assert turns, "the agent made no turn request"
    return str(turns[-1]["messages"][0]["content"])


def _await_quiescence(client: Any, sid: str) -> dict[str, Any]:
    result = client.request("_harness/await_quiescence", {"sessionId": sid, "timeoutMs": 30_000})
    assert result["quiescent"] is True, result
    return dict(result)


def test_full_loop_review_apply_prompt_rollback_and_tombstone(served: Serve, tmp_path: Path) -> None:
    here = served(AUTO_EVERY_TURN)
    client, sid, model = here.client, here.sid, here.model
    model.push(
        text("Noted: checks run with make check."),
        gate_reply(True),
        text(plan_json(memory_edit(evidence=[]), SKILL)),
    )
    prompt(client, sid, "We always run `make check`, never bare pytest.")
    rid = _await_quiescence(client, sid)["lastRefinementId"]
    [card] = refinement_cards(client, sid)
    assert card["kind"] == "edit" and card["status"] == "completed"
    # trust: with verify_skills off the card says the skill was not verified.
    assert [c["type"] for c in card["content"]] == ["diff", "diff", "content"]
    assert "not verified: verify_skills is off" in str(card["content"][2])
    assert card["content"][0]["path"].endswith("view/local/memory/test_command.md")
    assert MEMORY_TEXT in card["content"][0]["newText"]
    assert f"/rollback {rid}" in messages_between(client, here.frames_at, 10**9)
    state = client.request("_harness/state", {"sessionId": sid, "scope": "local"})
    assert {e["id"]: e["trust"] for e in state["entries"]} == {
        "test_command": "candidate",
        "run_checks": "candidate",
    }

    model.push(text("Running them."), gate_reply(False))
    prompt(client, sid, "run the checks")
    _await_quiescence(client, sid)
    system = _latest_turn_system_prompt(here.requests())
    assert MEMORY_TEXT in system and "run_checks" in system

    before = len(client.frames)
    done = prompt(client, sid, f"/rollback {rid}")
    assert f"Rolled back {rid}" in messages_between(client, before, done.seq)

    model.push(text("Done."), gate_reply(True), text(plan_json(memory_edit(evidence=[]))))
    prompt(client, sid, "thanks")
    _await_quiescence(client, sid)
    system = _latest_turn_system_prompt(here.requests())
    assert MEMORY_TEXT not in system and "run_checks" not in system
    refused = refinement_cards(client, sid)[-1]
    assert refused["status"] == "failed"
    assert "content was rejected before (tombstone" in str(refused["content"])


@pytest.mark.parametrize(
    ("choice", "trust", "stored"),
    [
        ("apply", "verified", True),
        ("apply_always", "verified", True),
        ("reject", None, False),
        ("reject_forever", None, False),
    ],
)
def test_review_with_each_permission_option(
    served: Serve, tmp_path: Path, choice: str, trust: str | None, stored: bool
) -> None:
    here = served(MANUAL_ONLY)
    client, sid, model = here.client, here.sid, here.model
    model.push(text(plan_json(memory_edit(evidence=[]))))
    client.request(
        "session/set_config_option", {"sessionId": sid, "configId": "refine_review", "value": "always"}
    )
    client.permission_policy = select(choice)
    prompt(client, sid, "/refine remember the test command")
    [asked] = [r for r in here.agent_requests() if r["method"] == "session/request_permission"]
    params = asked["params"]
    assert [o["optionId"] for o in params["options"]] == [
        "apply",
        "apply_always",
        "reject",
        "reject_forever",
    ]
    assert params["toolCall"]["kind"] == "edit" and params["toolCall"]["content"][0]["type"] == "diff"
    state = client.request("_harness/state", {"sessionId": sid, "scope": "local"})
    entries = {e["id"]: e for e in state["entries"]}
    assert ("test_command" in entries) is stored
    if trust:
        assert entries["test_command"]["trust"] == trust
    else:
        [stone] = state["tombstones"]
        assert stone["forever"] is (choice == "reject_forever")
    if choice == "apply_always":
        # Trusted for the session: the next local memory applies without asking.
        other = memory_edit("Prefer ruff.", evidence=[]) | {"id": "linter", "title": "Linter"}
        model.push(text(plan_json(other, summary="Remember the linter")))
        prompt(client, sid, "/refine")
        assert len([r for r in here.agent_requests() if r["method"] == "session/request_permission"]) == 1
        ids = {
            e["id"] for e in client.request("_harness/state", {"sessionId": sid, "scope": "local"})["entries"]
        }
        assert "linter" in ids
    if choice == "reject_forever":
        model.push(text(plan_json(memory_edit(evidence=[]))))
        client.permission_policy = select("apply")
        prompt(client, sid, "/refine")
        refused = refinement_cards(client, sid)[-1]
        assert refused["status"] == "failed"
        assert "content was rejected before (tombstone" in str(refused["content"])


def test_cancel_while_a_review_permission_is_pending_keeps_the_proposal_waiting(
    served: Serve, tmp_path: Path
) -> None:
    here = served(MANUAL_ONLY)
    client, sid, model = here.client, here.sid, here.model
    model.push(text(plan_json(memory_edit(evidence=[]))))
    client.request("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "ask"})
    client.hold_permissions = True
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/refine"}]}
    )
    here.wait_for(lambda m: m.get("method") == "session/request_permission")
    client.notify("session/cancel", {"sessionId": sid})
    assert client.result(rid)["stopReason"] == "cancelled"
    status = client.request("_harness/status", {"sessionId": sid})
    assert status == {"quiescent": True, "pending": 0, "inFlight": 0, "awaitingReview": 1}
    assert client.request("_harness/state", {"sessionId": sid, "scope": "local"})["entries"] == []
    # The waiting proposal can still be decided later, from a panel.
    pending_id = next(
        r["params"]["toolCall"]["toolCallId"]
        for r in here.agent_requests()
        if r["method"] == "session/request_permission"
    ).removeprefix("review-")
    decided = client.request(
        "_harness/review", {"sessionId": sid, "proposalId": pending_id, "decision": "apply"}
    )
    assert decided["status"] == "applied" and decided["result"]["edits"][0]["after"]["trust"] == "verified"
    settled = [u for u in client.updates(sid) if u.get("toolCallId") == f"review-{pending_id}"]
    assert settled[-1] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": f"review-{pending_id}",
        "status": "completed",
    }


def test_a_global_refinement_is_rolled_back_from_a_second_server_process(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text(plan_json(memory_edit(evidence=[]))))
    with servers(tmp_path / "home", model.base_url, config=MANUAL_ONLY) as group:
        first = group.spawn(tmp_path)
        sid, _ = new_session(first, tmp_path)
        first.permission_policy = select("apply")
        prompt(first, sid, "/refine --global")
        [card] = refinement_cards(first, sid)
        rid = card["rawOutput"]["refinementId"]
        assert card["rawOutput"]["scope"] == "global"

        second = group.spawn(tmp_path)
        other, _ = new_session(second, tmp_path)
        assert {
            e["id"]
            for e in second.request("_harness/state", {"sessionId": other, "scope": "global"})["entries"]
        } == {"test_command"}
        history = second.request("_harness/history", {"sessionId": other})["refinements"]
        assert [h["id"] for h in history] == [rid] and history[0]["scope"] == "global"
        undone = second.request("_harness/rollback", {"sessionId": other, "refinementId": rid})
        assert undone["rollbackOf"] == rid and undone["applied"] is True
        assert second.request("_harness/state", {"sessionId": other, "scope": "global"})["entries"] == []
        shown = second.request("_harness/show", {"sessionId": other, "refinementId": rid})
        assert shown["edits"][0]["after"]["content"] == MEMORY_TEXT
        with pytest.raises(RpcError) as refused:
            second.request("_harness/rollback", {"sessionId": other, "refinementId": "r-nope"})
        assert refused.value.code == -32602 and "no refinement 'r-nope'" in str(refused.value.message)


def test_await_quiescence_answers_after_the_settling_notification(served: Serve, tmp_path: Path) -> None:
    here = served(AUTO_EVERY_TURN)
    client, sid, model = here.client, here.sid, here.model
    # The review gate takes a while, so the prompt answers long before refinement settles.
    slow_gate = response([{"sleep": 3.0}, {"content": '{"should_refine": false, "rationale": "noise"}'}])
    model.push(text("Hello."), slow_gate)
    prompt(client, sid, "hi")
    status = client.request("_harness/status", {"sessionId": sid})
    assert status["quiescent"] is False and status["pending"] + status["inFlight"] >= 1
    wait_id = client.start_request("_harness/await_quiescence", {"sessionId": sid, "timeoutMs": 30_000})
    answer = client.response_frame(wait_id)
    assert answer.message["result"]["quiescent"] is True
    settled = [f for f in here.notifications("_harness/quiescence") if f.message["params"]["quiescent"]]
    assert settled and settled[-1].seq < answer.seq
    assert settled[-1].message["params"] == {"sessionId": sid, "quiescent": True, "pending": 0}
    mirrors = [
        f
        for f in here.update_frames("session_info_update")
        if "continual-acp" in f.message["params"]["update"].get("_meta", {})
    ]
    assert mirrors and mirrors[-1].seq < answer.seq
    assert (
        mirrors[-1].message["params"]["update"]["_meta"]["continual-acp"]["quiescence"]["quiescent"] is True
    )
    busy = [f for f in here.notifications("_harness/quiescence") if not f.message["params"]["quiescent"]]
    assert busy and busy[0].seq < settled[-1].seq


def test_wait_for_refinement_makes_the_prompt_answer_after_settlement(served: Serve, tmp_path: Path) -> None:
    here = served(AUTO_EVERY_TURN)
    client, sid, model = here.client, here.sid, here.model
    model.push(text("Noted."), gate_reply(True), text(plan_json(memory_edit(evidence=[]))))
    options = client.request(
        "session/set_config_option",
        {"sessionId": sid, "configId": "wait_for_refinement", "value": "true"},
    )["configOptions"]
    assert {o["id"]: o["currentValue"] for o in options}["wait_for_refinement"] == "true"
    done = prompt(client, sid, "We always run make check.")
    settled = [f for f in here.notifications("_harness/quiescence") if f.message["params"]["quiescent"]]
    assert settled and settled[-1].seq < done.seq
    [card] = refinement_cards(client, sid)
    assert card["status"] == "completed"


def test_rejected_entries_never_reach_the_prompt(served: Serve, tmp_path: Path) -> None:
    here = served(AUTO_EVERY_TURN)
    client, sid, model = here.client, here.sid, here.model
    model.push(text("Noted."), gate_reply(True), text(plan_json(memory_edit(evidence=[]))))
    prompt(client, sid, "We always run make check.")
    rid = _await_quiescence(client, sid)["lastRefinementId"]
    rejected = client.request("_harness/review", {"sessionId": sid, "proposalId": rid, "decision": "reject"})
    assert rejected["result"]["reviewOf"] == rid
    entries = client.request("_harness/state", {"sessionId": sid, "scope": "merged"})["entries"]
    assert [(e["id"], e["trust"]) for e in entries] == [("test_command", "rejected")]
    model.push(text("Ok."), gate_reply(False))
    prompt(client, sid, "what is the test command?")
    _await_quiescence(client, sid)
    assert MEMORY_TEXT not in _latest_turn_system_prompt(here.requests())


def test_truncated_planner_reply_shows_a_failed_card_and_applies_nothing(
    served: Serve, tmp_path: Path
) -> None:
    here = served(MANUAL_ONLY)
    client, sid, model = here.client, here.sid, here.model
    model.push(length_cut('{"summary": "Remember", "edits": [{"action": "create", "kind": "mem'))
    before = len(client.frames)
    done = prompt(client, sid, "/refine")
    [card] = refinement_cards(client, sid)
    assert card["status"] == "failed"
    assert "the model stopped before completing its JSON object; the output budget was exhausted" in str(
        card["content"]
    )
    assert ") failed: the model stopped before completing its JSON object" in messages_between(
        client, before, done.seq
    )
    assert client.request("_harness/history", {"sessionId": sid}) == {"refinements": []}


def test_harness_methods_are_advertised_under_the_extension_meta(served: Serve, tmp_path: Path) -> None:
    here = served(MANUAL_ONLY)
    client = here.client
    init = next(
        f.message["result"]
        for f in client.frames
        if "result" in f.message and "agentCapabilities" in f.message["result"]
    )
    meta = init["agentCapabilities"]["_meta"]["continual-acp"]
    assert set(meta["methods"]) >= {
        "_harness/state",
        "_harness/history",
        "_harness/show",
        "_harness/rollback",
        "_harness/review",
        "_harness/status",
        "_harness/await_quiescence",
    }
    assert meta["notifications"] == ["_harness/quiescence"]


def test_user_skills_are_commands_and_their_text_reaches_the_model(served: Serve, tmp_path: Path) -> None:
    folder = tmp_path / ".continual-acp" / "skills" / "deploy-notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: deploy-notes\ndescription: How this project deploys\n---\nDeploy with `make ship`.\n"
    )
    here = served(MANUAL_ONLY)
    client, sid, model = here.client, here.sid, here.model
    model.push(text("Shipping."))
    advertised = here.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
        )
    )
    names = [c["name"] for c in advertised.message["params"]["update"]["availableCommands"]]
    assert "skill:deploy-notes" in names and "refine" in names and "review" in names
    prompt(client, sid, "/skill:deploy-notes ship the release")
    [request] = here.requests()
    user = request["messages"][-1]["content"]
    assert "Deploy with `make ship`." in str(user) and "ship the release" in str(user)
    assert "- deploy-notes: How this project deploys" in request["messages"][0]["content"]
    before = len(client.frames)
    done = prompt(client, sid, "/skill:nope")
    assert "No user skill named 'nope'" in messages_between(client, before, done.seq)


def test_a_proposal_that_arrives_after_the_turn_is_asked_at_the_start_of_the_next_prompt(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text("Noted."), gate_reply(True, scope="global"), text(plan_json(memory_edit(evidence=[]))))
    with servers(tmp_path / "home", model.base_url, config=AUTO_EVERY_TURN) as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        client.permission_policy = select("apply")
        prompt(client, sid, "We always run make check, in every project.")
        _await_quiescence(client, sid)
        assert client.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 1
        waiting = [u for u in client.updates(sid) if str(u.get("toolCallId", "")).startswith("review-")]
        assert waiting and waiting[0]["status"] == "pending" and waiting[0]["kind"] == "edit"
        assert not [r for r in client.agent_requests if r["method"] == "session/request_permission"]

        model.push(text("Sure."), gate_reply(False))
        prompt(client, sid, "what next?")
        [asked] = [r for r in client.agent_requests if r["method"] == "session/request_permission"]
        assert asked["params"]["toolCall"]["toolCallId"] == waiting[0]["toolCallId"]
        # Asked before the turn: the turn's own system prompt already has the approved entry.
        assert MEMORY_TEXT in _latest_turn_system_prompt(model.requests)
        entries = client.request("_harness/state", {"sessionId": sid, "scope": "global"})["entries"]
        assert [(e["id"], e["trust"], e["scope"]) for e in entries] == [
            ("test_command", "verified", "global")
        ]


def test_history_pages_with_a_cursor_and_state_as_of_a_refinement(served: Serve, tmp_path: Path) -> None:
    here = served(MANUAL_ONLY)
    client, sid, model = here.client, here.sid, here.model
    other = memory_edit("Prefer ruff.", evidence=[]) | {"id": "linter", "title": "Linter"}
    model.push(text(plan_json(memory_edit(evidence=[]))))
    model.push(text(plan_json(other, summary="Remember the linter")))
    prompt(client, sid, "/refine")
    prompt(client, sid, "/refine")
    first = client.request("_harness/history", {"sessionId": sid, "limit": 1})
    [newest] = first["refinements"]
    assert newest["summary"] == "Remember the linter" and newest["edits"][0]["id"] == "linter"
    second = client.request("_harness/history", {"sessionId": sid, "limit": 1, "cursor": first["nextCursor"]})
    [older] = second["refinements"]
    assert older["summary"] == "Remember the test command" and "nextCursor" not in second
    as_of = client.request("_harness/state", {"sessionId": sid, "asOf": older["id"]})
    assert [e["id"] for e in as_of["entries"]] == ["test_command"]
    with pytest.raises(RpcError) as bad:
        client.request("_harness/history", {"sessionId": sid, "limit": 0})
    assert bad.value.code == -32602


def test_a_skill_added_during_the_session_is_advertised_at_the_next_prompt(
    served: Serve, tmp_path: Path
) -> None:
    here = served(MANUAL_ONLY)
    client, sid, model = here.client, here.sid, here.model
    model.push(text("Hello."))
    here.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
        )
    )
    folder = tmp_path / ".continual-acp" / "skills" / "release"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: release\ndescription: Cut a release\n---\nTag it.\n")
    done = prompt(client, sid, "hi")
    adverts = [
        f for f in here.update_frames("available_commands_update") if f.message["params"]["sessionId"] == sid
    ]
    assert len(adverts) == 2 and adverts[1].seq < done.seq
    names = [c["name"] for c in adverts[1].message["params"]["update"]["availableCommands"]]
    assert "skill:release" in names


def test_refinement_cards_are_replayed_by_session_load(model: ScriptedModelServer, tmp_path: Path) -> None:
    model.push(text("Noted."), gate_reply(True), text(plan_json(memory_edit(evidence=[]))))
    with servers(tmp_path / "home", model.base_url, config=AUTO_EVERY_TURN) as group:
        first = group.spawn(tmp_path)
        sid, _ = new_session(first, tmp_path)
        prompt(first, sid, "We always run make check.")
        rid = _await_quiescence(first, sid)["lastRefinementId"]
        first.close()
        second = group.spawn(tmp_path)
        second.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        [card] = refinement_cards(second, sid)
        assert card["toolCallId"] == f"refinement-{rid}" and card["status"] == "completed"
        assert MEMORY_TEXT in card["content"][0]["newText"]


def test_review_command_asks_every_waiting_proposal(model: ScriptedModelServer, tmp_path: Path) -> None:
    from agent_core.testing.scripted_model import tool_call

    cell = (
        "harness.create('memory', 'Test command', 'Run make check.', global_=True)\n"
        "harness.create('memory', 'Linter', 'Prefer ruff.', global_=True)\n"
    )
    model.push(tool_call(cell, "Remember two conventions"), text("Both wait for your review."))
    with servers(tmp_path / "home", model.base_url, config=MANUAL_ONLY) as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        prompt(client, sid, "Remember how we test and lint, everywhere.")
        assert client.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 2
        client.permission_policy = select("reject")
        before = len(client.frames)
        done = prompt(client, sid, "/review")
        assert "Reviewed 2 of 2 waiting proposals." in messages_between(client, before, done.seq)
        asked = [r for r in client.agent_requests if r["method"] == "session/request_permission"]
        assert len(asked) == 2
        state = client.request("_harness/state", {"sessionId": sid, "scope": "global"})
        assert state["entries"] == [] and len(state["tombstones"]) == 2
        after = prompt(client, sid, "/review")
        assert "Nothing is waiting for review" in messages_between(client, done.seq, after.seq)


def test_a_cell_writing_an_empty_lesson_is_refused_with_the_reason_whatever_the_review_policy(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    import json

    from agent_core.testing.scripted_model import tool_call

    cell = "print(harness.create('memory', 'Dots', '...', global_=True))\n"
    model.push(tool_call(cell, "Remember nothing"), text("Done."))
    with servers(tmp_path / "home", model.base_url, config=MANUAL_ONLY) as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        prompt(client, sid, "Remember this.")
        # ask mode holds every write for review; an empty lesson is refused before it gets there.
        assert client.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 0
        state = client.request("_harness/state", {"sessionId": sid, "scope": "global"})
        assert state["entries"] == []
        tool_result = json.dumps(model.requests[-1]["messages"][-1])
        assert "empty lesson: the content has nothing but punctuation and whitespace" in tool_result
        assert "'status': 'refused'" in tool_result


def test_a_refinements_prediction_is_kept_on_its_entry_and_checked_when_its_command_runs_again(
    served: Serve, tmp_path: Path
) -> None:
    here = served(MANUAL_ONLY)
    client, sid, model = here.client, here.sid, here.model
    import json

    from agent_core.testing.scripted_model import tool_call

    plan = json.loads(plan_json(memory_edit(evidence=[])))
    plan["prediction"] = {"command": "make check", "expect": "the tests pass"}
    model.push(text(json.dumps(plan)))
    model.push(tool_call("print('make check')", "Run the checks"), text("All green."))
    prompt(client, sid, "/refine")
    state = client.request("_harness/state", {"sessionId": sid, "scope": "local"})
    assert state["entries"][0]["metadata"]["prediction"] == plan["prediction"]
    prompt(client, sid, "Run the checks.")
    why = messages_between(client, *_command_span(client, sid, "/why test_command"))
    assert (
        "Prediction (local `test_command`): when `make check` runs: the tests pass — 1 hit(s), 0 miss(es)"
        in why
    )


def _command_span(client: Any, sid: str, command: str) -> tuple[int, int]:
    before = len(client.frames)
    done = prompt(client, sid, command)
    return before, done.seq
