"""The ACP v2 draft mapping (acp_server/v2) without a server: its builders pinned by
`tests/golden/v2/`, every frame (built, or a v1 golden frame reshaped) valid against the v2 draft
schema the npm SDK ships, the foreground state machine, and the switch.

Regenerate the goldens deliberately with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/acp_server/test_v2_frames.py`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_client import check_v2

from acp_server.protocol.initialize import initialize_answer, initialize_result
from acp_server.v2 import builders, reshape
from acp_server.v2.dialect import V2Dialect
from acp_server.v2.switch import speaks_v2, switch_on
from agent_core import load_config
from agent_core.config.option import ConfigError
from agent_core.config.table import from_env

GOLDEN_V1 = Path(__file__).resolve().parents[1] / "golden"
GOLDEN = GOLDEN_V1 / "v2"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
ON = {"CONTINUAL_ACP_PROTOCOL": "2"}
REFINING = {"type": "refinement", "id": "running-1", "title": "Refining the harness"}
CHILD = {"type": "session", "sessionId": "s2", "name": "tests", "state": "running", "parentSessionId": "s1"}

CASES: dict[str, tuple[Callable[[], Any], str]] = {
    "prompt_accepted": (lambda: builders.prompt_accepted("user_1"), "PromptResponse"),
    "user_message": (
        lambda: builders.user_message("user_1", [{"type": "text", "text": "hi"}]),
        "SessionUpdate",
    ),
    "state_update__running": (lambda: builders.state_update("running", []), "SessionUpdate"),
    "state_update__requires_action": (lambda: builders.state_update("requires_action", []), "SessionUpdate"),
    "state_update__idle": (
        lambda: builders.state_update(
            "idle",
            [builders.background_work(REFINING), builders.background_work(CHILD)],
            stop_reason="end_turn",
        ),
        "SessionUpdate",
    ),
    "state_update__error": (
        lambda: builders.state_update(
            "idle", [], stop_reason="error", error={"code": -32603, "message": "the model endpoint failed"}
        ),
        "SessionUpdate",
    ),
    "background_work__refinement": (lambda: builders.background_work(REFINING), "BackgroundWork"),
    "background_work__subagent": (lambda: builders.background_work(CHILD), "BackgroundWork"),
    "initialize_response": (
        lambda: initialize_answer(["_harness/status"], ["_harness/quiescence"], 2, None, environ=ON),
        "InitializeResponse",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_v2_frame_matches_its_golden_file_and_the_v2_draft_schema(case: str) -> None:
    build, name = CASES[case]
    text = json.dumps(build(), indent=2, ensure_ascii=False) + "\n"
    path = GOLDEN / f"{case}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text
    assert check_v2(name, build()) is None


def test_the_v2_check_rejects_a_state_update_whose_background_is_not_a_list() -> None:
    assert check_v2("SessionUpdate", {**builders.state_update("idle", []), "background": {}}) is not None


V2_KINDS = {
    "user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call_update", "plan_update",
    "available_commands_update", "config_option_update", "session_info_update", "usage_update", "notice",
    "compaction_update", "compaction_summary_chunk",
}  # fmt: skip
V1_ONLY = {"plan_update", "subagent_update"}  # unstable v1 updates, never sent to a v2 client


def _v1_updates() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(GOLDEN_V1.glob("*.json")):
        frame = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(frame, dict) and "sessionUpdate" in frame and frame["sessionUpdate"] not in V1_ONLY:
            found.append((path.stem, frame))
    return found


@pytest.mark.parametrize(("case", "update"), _v1_updates(), ids=[c for c, _ in _v1_updates()])
def test_every_v1_update_goes_to_a_v2_client_as_a_valid_v2_update_of_its_kind_or_not_at_all(
    case: str, update: dict[str, Any]
) -> None:
    dialect = V2Dialect(_no_send)
    sent = dialect.notification("session/update", {"sessionId": "s1", "update": update})
    if update["sessionUpdate"] in reshape.DROPPED:
        assert sent == []
        return
    for method, params in sent:
        assert method == "session/update"
        assert check_v2("UpdateSessionNotification", params) is None
        assert params["update"]["sessionUpdate"] in V2_KINDS | {"state_update"}


def test_a_v1_permission_request_and_session_answer_reshape_into_valid_v2_frames() -> None:
    request = json.loads((GOLDEN_V1 / "permission_request__cell.json").read_text(encoding="utf-8"))
    params = request.get("params", request)
    assert check_v2("RequestPermissionRequest", reshape.permission_request(params)) is None
    new = json.loads((GOLDEN_V1 / "new_session_response.json").read_text(encoding="utf-8"))
    assert check_v2("NewSessionResponse", reshape.session_result(new)) is None


async def _no_send(method: str, params: Any) -> None:
    raise AssertionError(f"the dialect sent {method} by itself")


def test_the_foreground_state_follows_prompts_and_their_own_permission_requests_only() -> None:
    sent: list[dict[str, Any]] = []

    async def send(method: str, params: Any) -> None:
        sent.append(params["update"])

    def states() -> list[tuple[str, str | None]]:
        return [(u["state"], u.get("stopReason")) for u in sent if u["sessionUpdate"] == "state_update"]

    async def scenario() -> None:
        dialect = V2Dialect(send)
        permission = {"sessionId": "s1", "toolCall": {"toolCallId": "c1", "title": "add"}, "options": []}
        child = {**permission, "_meta": {"continual-acp": {"subagent": {"sessionId": "s2"}}}}
        await dialect.begin("s1", "user_1", [{"type": "text", "text": "go"}])
        await dialect.begin("s1", "user_2", [{"type": "text", "text": "and this"}])  # queued: still running
        before, _ = dialect.request("session/request_permission", child)  # a child's: background work
        assert before == [] and dialect.answered("session/request_permission", child) == []
        before, _ = dialect.request("session/request_permission", permission)
        sent.extend(p["update"] for _, p in before)
        sent.extend(p["update"] for _, p in dialect.answered("session/request_permission", permission))
        await dialect.end("s1", "end_turn")
        await dialect.end("s1", "cancelled")

    anyio.run(scenario)
    assert states() == [
        ("running", None),
        ("requires_action", None),
        ("running", None),
        ("idle", "cancelled"),
    ]
    assert [u["messageId"] for u in sent if u["sessionUpdate"] == "user_message"] == ["user_1", "user_2"]


def test_a_resumed_session_reports_its_state_before_the_answer_which_has_no_modes() -> None:
    dialect = V2Dialect(_no_send)
    new = json.loads((GOLDEN_V1 / "new_session_response.json").read_text(encoding="utf-8"))
    before, result = dialect.result("session/resume", {"sessionId": "s1", "cwd": "/work"}, new)
    assert [(m, p["update"]["state"]) for m, p in before] == [("session/update", "idle")]
    assert check_v2("ResumeSessionResponse", result) is None and "modes" not in result


def test_the_switch_speaks_v2_only_when_on_and_asked_and_refuses_a_bad_value() -> None:
    assert speaks_v2(2, ON) and speaks_v2(3, ON)
    assert not speaks_v2(1, ON) and not speaks_v2(2, {}) and not speaks_v2(True, ON)
    with pytest.raises(ConfigError, match="CONTINUAL_ACP_PROTOCOL"):
        from_env("CONTINUAL_ACP_PROTOCOL", {"CONTINUAL_ACP_PROTOCOL": "v2"})
    # The configuration every session request checks refuses it too (-32012 naming the setting).
    env = {"CONTINUAL_ACP_PROTOCOL": "3", "HOME": "/nonexistent", "CONTINUAL_ACP_HOME": "/nonexistent/data"}
    with pytest.raises(ConfigError, match="it must be '1' or '2'"):
        load_config(env)


@pytest.mark.parametrize("value", ["2", " 2", "2 ", "02", "2.0", "two", "", "1", "3"])
def test_the_switch_is_on_exactly_when_the_config_table_reads_the_setting_as_2(value: str) -> None:
    """The early `initialize` reads the variable itself: a value the table refuses (so every session
    request answers -32012 naming it) must not have been answered in v2 first."""
    try:
        read = from_env("CONTINUAL_ACP_PROTOCOL", {"CONTINUAL_ACP_PROTOCOL": value})
    except ConfigError:
        read = None
    assert switch_on({"CONTINUAL_ACP_PROTOCOL": value}) is (read == "2")


def test_a_client_asking_for_v2_gets_the_v1_answer_byte_for_byte_while_the_switch_is_off() -> None:
    v1 = initialize_result(["_harness/status"], ["_harness/quiescence"], None)
    assert initialize_answer(["_harness/status"], ["_harness/quiescence"], 2, None, environ={}) == v1


def test_auth_login_is_refused_on_a_v1_connection_as_an_unknown_method() -> None:
    from acp_server.protocol.errors import AcpError
    from acp_server.protocol.params import AuthenticateParams
    from acp_server.protocol.registry import MethodRegistry, RequestContext
    from acp_server.sessions.methods import AcpServer

    server = AcpServer(MethodRegistry())
    ctx = RequestContext(connection=None, method="auth/login", request_id=1, is_notification=False)  # type: ignore[arg-type]

    async def login() -> None:
        await server.login(ctx, AuthenticateParams("continual-acp-setup"))

    with pytest.raises(AcpError) as refused:
        anyio.run(login)
    assert refused.value.code == -32601


def test_the_method_table_initialize_speaks_v2_only_to_a_client_asking_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from acp_server.protocol.params import initialize_params
    from acp_server.protocol.registry import MethodRegistry, RequestContext
    from acp_server.sessions.methods import AcpServer

    class Peer:
        dialect: object = None

        async def notify_as_is(self, method: str, params: object) -> None:
            raise AssertionError("nothing is sent by initialize")

    monkeypatch.setenv("CONTINUAL_ACP_PROTOCOL", "2")
    server = AcpServer(MethodRegistry())
    server.connection = Peer()  # type: ignore[assignment]
    ctx = RequestContext(connection=None, method="initialize", request_id=1, is_notification=False)  # type: ignore[arg-type]

    async def initialize(version: int) -> dict[str, Any]:
        return await server.initialize(ctx, initialize_params({"protocolVersion": version}))

    answer = anyio.run(initialize, 2)
    assert answer["protocolVersion"] == 2 and check_v2("InitializeResponse", answer) is None
    assert isinstance(server.v2_dialect(), V2Dialect)
    assert anyio.run(initialize, 1)["protocolVersion"] == 1
    assert server.v2_dialect() is None and server.connection.dialect is None
