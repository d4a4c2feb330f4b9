"""What an editor asks beyond a plain session, driven by the official ACP SDK client on one server.

`run-editor-flows.mjs` spawns the real server over stdio (the client advertises `elicitation.form`)
and validates every frame in both directions against the JSON schema the npm package ships (the
unstable one for `systemPrompt`): the editor's system prompt (override on new, append on load),
`editor.ask` from a cell answered and declined by the SDK's form handler, an anchored
`_session/rewind`, reviews as forms, and a raw line over the server's line limit. This module
scripts the model, runs the client once, and pins each flow with its own test on the report and on
what the scripted model received.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import server_zygote
from system_deps import requires
from test_conformance import NODE, _node, assert_run_clean, node_env

pytestmark = requires(NODE is not None, "node is not installed")

OVERRIDE = "You are a terse reviewer who signs every answer OVERRIDE-MARK."
APPEND = "Always answer in French (APPEND-MARK)."
BASE_OPENING = "You are continual-acp, a coding agent"
HARNESS_RULES = 'Harness entries (under "Harness") are hints, shown as quoted data'
EDITOR_HEADING = "# Instructions from the editor\n"
PLAN: dict[str, Any] = {
    "systemPrompt": {
        "override": {
            "text": OVERRIDE,
            "prompt": "Which instructions hold now? (override)",
            "status": "in place of the base wording; the harness rules kept",
        },
        "append": {
            "text": APPEND,
            "prompt": "Which instructions hold now? (append)",
            "status": "the base, then the editor's instructions",
        },
    },
    "ask": {
        "accept": {
            "prompt": "Ask me whether to release",
            "question": "Release now?",
            "answer": "not yet",
            "expect": "answered not yet",
        },
        "decline": {
            "prompt": "Ask me which branch",
            "question": "Which branch?",
            "expect": "asked: declined",
        },
    },
    "rewind": {"probe": {"prompt": "Which answers are kept?", "expect": "['answer_a']"}},
    "review": {
        "prompt": "Remember how we release",
        "next": "Next, please",
        "accept": {"id": "release", "text": "Release with tools/ship --sign, never by hand."},
        "reject": {"id": "lint", "reason": "lint is not a release step"},
    },
    "oversized": {"limit": 65536, "bytes": 70000},
}
ASK_ACCEPT = (
    "answer_a = await editor.ask('Release now?', choices=['yes', 'not yet'])\n"
    "print(answer_a['status'], answer_a['answer'])"
)
ASK_DECLINE = "answer_b = editor.ask('Which branch?')\nprint('asked:', answer_b['status'])"
PROBE = "print(sorted(n for n in ('answer_a', 'answer_b') if n in globals()))"
CREATE = (
    "harness.create('memory', 'Release steps', 'Release with tools/ship --sign.', id='release')\n"
    "harness.create('memory', 'Lint', 'Run make lint first.', id='lint')\n"
)


@pytest.fixture(scope="module")
def flows_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of run-editor-flows.mjs (one server process); its report, with the model's requests
    under `_requests`."""
    from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

    tmp_path = tmp_path_factory.mktemp("editor-flows")
    workdir = tmp_path / "project"
    workdir.mkdir()
    script = [
        text("Noted."),  # the override probe
        text("Noté."),  # the append probe
        tool_call(ASK_ACCEPT, title="Ask about the release"),
        text("You said not yet."),
        tool_call(ASK_DECLINE, title="Ask about the branch"),
        text("You declined."),
        tool_call(PROBE, title="Probe the answers"),
        text("Probed."),
        tool_call(CREATE, title="Remember the release steps"),
        text("Proposed."),
        text("OK."),  # the prompt at whose start the reviews are asked
    ]
    config = tmp_path / "config.toml"
    config.write_text('refine_review = "always"\nauto_refine_every = 0\n', encoding="utf-8")
    plan = {"agent": server_zygote.server_command(), "cwd": str(workdir), **PLAN}
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    with ScriptedModelServer(script) as model:
        env = node_env(
            tmp_path,
            model.base_url,
            CONTINUAL_ACP_CONFIG=str(config),
            CONTINUAL_ACP_MAX_MESSAGE_BYTES=str(PLAN["oversized"]["limit"]),
        )
        report = _node("run-editor-flows.mjs", str(plan_path), env=env)
        report["_requests"] = list(model.requests)
    return report


def _step(report: dict[str, Any], prefix: str) -> dict[str, Any]:
    found = [s for s in report["steps"] if s["name"].startswith(prefix)]
    assert len(found) == 1, f"step {prefix}... not run: " + report["_stderr"][-3000:]
    assert found[0]["ok"], found[0]["detail"] + "\n" + report["_stderr"][-3000:]
    detail: dict[str, Any] = found[0]["detail"] or {}
    return detail


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _request_for(report: dict[str, Any], words: str) -> dict[str, Any]:
    """The last model request of the turn prompted with `words` (its last user message)."""
    found = [
        r
        for r in report["_requests"]
        if words in _content([m for m in r["messages"] if m["role"] == "user"][-1])
    ]
    assert found, [_content(r["messages"][-1])[:80] for r in report["_requests"]]
    return found[-1]


def _system_prompt(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return _content(first)


def test_the_sdk_client_runs_every_editor_flow_on_one_server_with_every_frame_schema_valid(
    flows_report: dict[str, Any],
) -> None:
    report = flows_report
    assert_run_clean(report)
    assert report["exit"] == {"code": 0, "signal": None}
    assert report["ok"] is True
    # The only unstable frames are the two lifecycle requests that carried the editor's instructions.
    assert report["unstableFrames"] == [
        {"direction": "client->agent", "method": "session/new", "fields": ["systemPrompt"]},
        {"direction": "client->agent", "method": "session/load", "fields": ["systemPrompt"]},
    ]


def test_a_system_prompt_override_on_new_reaches_the_model_in_place_of_the_base(
    flows_report: dict[str, Any],
) -> None:
    _step(flows_report, "systemPrompt override on session/new")
    sent = _system_prompt(_request_for(flows_report, PLAN["systemPrompt"]["override"]["prompt"]))
    assert sent.startswith(EDITOR_HEADING + OVERRIDE)
    assert BASE_OPENING not in sent and HARNESS_RULES in sent


def test_a_system_prompt_append_on_load_follows_the_base_and_replaces_the_override(
    flows_report: dict[str, Any],
) -> None:
    _step(flows_report, "systemPrompt append on session/load")
    sent = _system_prompt(_request_for(flows_report, PLAN["systemPrompt"]["append"]["prompt"]))
    assert sent.startswith(BASE_OPENING) and EDITOR_HEADING + APPEND in sent
    assert OVERRIDE not in sent


def test_editor_ask_from_a_cell_is_answered_and_declined_by_the_sdk_clients_form_handler(
    flows_report: dict[str, Any],
) -> None:
    assert _step(flows_report, "editor.ask from a cell is answered")["choices"] == ["yes", "not yet"]
    _step(flows_report, "editor.ask declined")
    # What each cell printed went back to the model as the cell's result.
    for flow in ("accept", "decline"):
        ask = PLAN["ask"][flow]
        cell_result = _request_for(flows_report, ask["prompt"])["messages"][-1]
        assert cell_result["role"] == "tool" and ask["expect"] in _content(cell_result)


def test_an_anchored_rewind_from_the_sdk_client_drops_the_later_prompt_and_its_variable(
    flows_report: dict[str, Any],
) -> None:
    _step(flows_report, "anchored _session/rewind")
    probe = _request_for(flows_report, PLAN["rewind"]["probe"]["prompt"])
    users = [_content(m) for m in probe["messages"] if m["role"] == "user"]
    assert not any(PLAN["ask"]["decline"]["prompt"] in u for u in users)
    assert any(PLAN["ask"]["accept"]["prompt"] in u for u in users)


def test_reviews_answered_as_sdk_forms_apply_the_rewrite_and_keep_the_rejections_reason(
    flows_report: dict[str, Any],
) -> None:
    detail = _step(flows_report, "harness reviews as forms")
    review = PLAN["review"]
    assert detail["entries"] == {review["accept"]["id"]: review["accept"]["text"]}
    assert review["reject"]["reason"] in detail["tombstone"]["reason"]


def test_a_raw_oversized_line_is_answered_with_its_request_id_and_the_server_goes_on(
    flows_report: dict[str, Any],
) -> None:
    error = _step(flows_report, "a raw line over the limit")["error"]
    assert error["code"] == -32600
    assert error["message"].startswith("message of ")
