"""Conformance with a real ACP client: the official TypeScript SDK drives a full session.

`run-session.mjs` (Node, `@agentclientprotocol/sdk` 2.x app API) spawns the real server over stdio
and validates every frame in both directions against the JSON schema the npm package ships; this
test scripts the model endpoint, runs it and asserts on its JSON report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import server_zygote
from system_deps import requires

HERE = Path(__file__).resolve().parent
NODE = shutil.which("node")
# tests/mcp holds the MCP test server (the SDK's server side) and the helper that serves it over HTTP.
sys.path.insert(0, str(HERE.parent / "mcp"))

from mcp_helpers import SERVER_SCRIPT, serve_http  # noqa: E402

pytestmark = requires(NODE is not None, "node is not installed")


def _node(
    script: str, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    assert (HERE / "node_modules" / "@agentclientprotocol" / "sdk").is_dir(), (
        "Node deps missing: run `npm ci` in tests/conformance (.ci/run does)"
    )
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(HERE / script), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=110,
        cwd=HERE,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.strip().splitlines()
    assert lines, f"no report on stdout; stderr:\n{done.stderr[-4000:]}"
    report: dict[str, Any] = json.loads(lines[-1])
    report["_stderr"] = done.stderr
    return report


def node_env(tmp_path: Path, model_url: str, *, home: bool = True, **extra: str) -> dict[str, str]:
    """The environment a Node run's server gets: this one, with a private data dir and config home
    (`home`: HOME too), the scripted model, and `extra`."""
    env = dict(os.environ)
    env.update(
        CONTINUAL_ACP_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        OPENAI_BASE_URL=model_url,
        OPENAI_API_KEY="test-key",
        CONTINUAL_ACP_MODEL="scripted",
    )
    if home:
        env["HOME"] = str(tmp_path)
    env.update(extra)
    return env


def assert_run_clean(report: dict[str, Any]) -> None:
    """Every step passed, every frame was schema-valid, and the SDK parsed every message."""
    failed = [s for s in report["steps"] if not s["ok"]]
    assert not failed, json.dumps(failed, indent=1) + "\n" + report["_stderr"][-3000:]
    assert report["findings"] == [], json.dumps(report["findings"], indent=1)
    assert report["sdkErrors"] == []


def _frame(direction: str, msg: dict[str, Any]) -> list[Any]:
    return [direction, {"jsonrpc": "2.0", **msg}]


def _new_session_with_system_prompt(request_id: int, system_prompt: object) -> list[Any]:
    params = {"cwd": "/tmp", "mcpServers": [], "systemPrompt": system_prompt}
    return _frame("client->agent", {"id": request_id, "method": "session/new", "params": params})


def test_validator_accepts_schema_conformant_frames() -> None:
    frames = [
        _frame(
            "client->agent", {"id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}
        ),
        _frame("agent->client", {"id": 1, "result": {"sessionId": "s1"}}),
        _frame(
            "agent->client",
            {
                "method": "session/update",
                "params": {
                    "sessionId": "s1",
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": "hi"},
                    },
                },
            },
        ),
        _frame("agent->client", {"method": "_harness/quiescence", "params": {"sessionId": "s1"}}),
        # a field only the unstable schema defines, on a stable request: checked there, and counted
        _new_session_with_system_prompt(2, {"mode": "append", "content": [{"type": "text", "text": "hi"}]}),
    ]
    report = _node("validate-frames.mjs", stdin=json.dumps(frames))
    assert report["findings"] == []
    assert report["unstableFrames"] == [
        {"direction": "client->agent", "method": "session/new", "fields": ["systemPrompt"]}
    ]


def test_validator_rejects_frames_that_break_the_schema() -> None:
    frames = [
        # a tool call with an unknown kind and no title
        _frame(
            "agent->client",
            {
                "method": "session/update",
                "params": {
                    "sessionId": "s",
                    "update": {"sessionUpdate": "tool_call", "toolCallId": "c", "kind": "bogus"},
                },
            },
        ),
        # a prompt response with a stop reason ACP does not have (the SDK itself passes these through)
        _frame(
            "client->agent", {"id": 7, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
        ),
        _frame("agent->client", {"id": 7, "result": {"stopReason": "done"}}),
        # a batch
        ["agent->client", [{"jsonrpc": "2.0", "id": 1, "result": {}}]],
        # a request the agent may not send
        _frame(
            "agent->client", {"id": 9, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
        ),  # a systemPrompt whose content is not an array of blocks (the stable schema knows no systemPrompt)
        _new_session_with_system_prompt(10, {"mode": "append", "content": "be brief"}),
    ]
    findings = _node("validate-frames.mjs", stdin=json.dumps(frames))["findings"]
    assert [f["what"] for f in findings] == [
        "session/update params",
        "session/prompt result",
        "envelope",
        "session/prompt",
        "session/new params (unstable systemPrompt)",
    ]


# ------------------------------------------------------------------ the full session

CELL_CODE = "# Greet from the kernel\nprint('hello from the kernel')"
ASK_CODE = "print(6 * 7)"
REJECT_CODE = "print('SIDE' + 'EFFECT')"  # the joined word appears only if the cell really ran
HOLD_CODE = "print('never asked twice')"
REMEMBER_CODE = "harness.create('memory', 'Test command', 'Run make check before committing.')"
LONG_CODE = "import time\nprint('long cell started', flush=True)\ntime.sleep(60)"
# One tool of the stdio server, one of the streamable-HTTP server (by attribute), and a tool the stdio
# server marks destructive (asked about even in auto mode).
MCP_CODE = """\
print(await mcp.call('tools', 'describe', name='zed'))
print(await mcp.web_tools.add(a=1000, b=337))
print(await mcp.call('tools', 'delete-file', path='/tmp/conformance-doomed'))"""
# After session/load in a new agent process: both servers reconnected from the load's mcpServers.
RELOAD_CODE = """\
print(await mcp.call('tools', 'describe', name='load', times=2))
print(await mcp.web_tools.add(a=4000, b=2))"""


# The timeline steps (run-session.mjs `timelineSteps`, on the second connection, in a session of their
# own): three prompts set ta, tb, tc; a fork; a rewind of one prompt; the fork loaded; a steering
# message sent while the turn waits for a permission answer.
TIMELINE_PROBE = "print(sorted(n for n in ('ta', 'tb', 'tc') if n in globals()))"
STEER_TEXT = "Also print the kernel's pid."
TIMELINE = {
    "prompts": [
        {"prompt": "Set ta", "code": "ta = 1"},
        {"prompt": "Set tb", "code": "tb = 2"},
        {"prompt": "Set tc", "code": "tc = 3"},
    ],
    "probe": {
        "prompt": "Which timeline names are set?",
        "before": "['ta', 'tb']",
        "after": "['ta', 'tb', 'tc']",
        "gone": "tc",
    },
    "steer": {"prompt": "Run a checked cell", "text": STEER_TEXT},
}


def timeline_replies() -> list[Any]:
    from agent_core.testing.scripted_model import text, tool_call

    replies: list[Any] = []
    for step in TIMELINE["prompts"]:
        replies += [tool_call(step["code"]), text("set")]
    replies += [tool_call(TIMELINE_PROBE), text("probed")]  # the rewound session
    replies += [tool_call(TIMELINE_PROBE), text("probed")]  # the fork
    replies += [tool_call("print('checked cell ran')"), text("Ran it, and heard the steering.")]
    return replies


# The extension steps each connection runs (run-session.mjs `extensionSteps`): a `/refine` (quiescence),
# `/compact` (compaction updates) and a prompt the endpoint refuses for its tools (a notice). The first
# connection plays a client that opts in to all of them, the second (which loads the session) one that
# opts in to none.
VARIANTS = {"first": "opted-in", "second": "plain"}
SUMMARY = "The user greeted the kernel and asked for arithmetic."
NOTICE_REPLY = "Answered without tools."


def refinement_plan(entry_id: str) -> str:
    """A planner answer for `/refine` that creates one memory (a distinct id per connection)."""
    edit = {
        "action": "create",
        "kind": "memory",
        "id": entry_id,
        "title": entry_id.replace("_", " ").capitalize(),
        "content": "Run `make check` before committing.",
        "evidence": [],
    }
    plan = {"summary": f"Remember {entry_id}", "rationale": "the user asked", "expected_outcome": "x"}
    return json.dumps({**plan, "edits": [edit]})


@pytest.fixture(scope="module")
def http_mcp_url() -> Iterator[str]:
    """A real streamable-HTTP MCP server on 127.0.0.1 (random port); its endpoint URL."""
    for base in serve_http("--http"):
        yield base + "/mcp"


@pytest.fixture(scope="module")
def session_report(tmp_path_factory: pytest.TempPathFactory, http_mcp_url: str) -> dict[str, Any]:
    """One run of run-session.mjs (two server processes, one per client variant); its JSON report,
    with the run's process marker under `_marker`."""
    from agent_core.testing.scripted_model import ScriptedModelServer, error, text, tool_call
    from agent_core.turn import text_actions

    tmp_path = tmp_path_factory.mktemp("conformance")

    def extension_replies(entry_id: str) -> list[Any]:
        return [
            text(refinement_plan(entry_id)),  # /refine
            text(SUMMARY),  # /compact
            error(400, "tools are not supported by this model"),  # the notice prompt, then text mode
            text(NOTICE_REPLY),
        ]

    script = [
        tool_call(CELL_CODE, title="Greet from the kernel"),
        text("The kernel said hello."),
        tool_call(MCP_CODE, title="Use the editor's MCP tools"),
        text("Described zed, added, deleted."),
        tool_call(ASK_CODE),
        text("6 * 7 is 42."),
        tool_call(REJECT_CODE, title="Print a side effect"),
        text("Understood, I will not run it."),
        tool_call(HOLD_CODE, title="Wait for permission"),
        tool_call(LONG_CODE, title="Wait a minute"),
        tool_call(REMEMBER_CODE, title="Remember the test command"),
        text("Noted."),
        *extension_replies("first_connection_note"),
        tool_call(RELOAD_CODE, title="Use the MCP tools again"),
        text("Still connected."),
        *extension_replies("second_connection_note"),
        *timeline_replies(),
    ]
    workdir = tmp_path / "project"
    workdir.mkdir()
    marker = uuid.uuid4().hex
    stdio_mcp = {
        "name": "tools",
        "command": sys.executable,
        "args": [SERVER_SCRIPT],
        # The env of an MCP server goes to that server only: the mark makes it part of the orphan check.
        "env": [{"name": "CONTINUAL_ACP_TEST_MARK", "value": marker}],
    }
    plan = {
        "agent": server_zygote.server_command(),
        "cwd": str(workdir),
        "mcpServers": [stdio_mcp, {"type": "http", "name": "web-tools", "url": http_mcp_url, "headers": []}],
        "mcp": {
            "prompt": "Use the MCP tools",
            "expect": [
                "{'name': 'zed', 'length': 3, 'repeated': 'zed'}",
                "1337",
                "deleted /tmp/conformance-doomed",
            ],
            "asks": ["delete-file", "/tmp/conformance-doomed"],
        },
        "cell": {"prompt": "Say hello from the kernel", "code": CELL_CODE, "expect": "hello from the kernel"},
        "ask": {"prompt": "What is 6 * 7?", "code": ASK_CODE, "expect": "42"},
        "reject": {"prompt": "Print a side effect", "marker": "SIDEEFFECT"},
        "hold": {"prompt": "Ask me first"},
        "cancel": {"prompt": "Wait a minute", "started": "long cell started"},
        "slash": "/history",
        "remember": {"prompt": "Remember how tests are run here"},
        "reload": {
            "prompt": "Use the MCP tools after the reload",
            "expect": ["{'name': 'load', 'length': 4, 'repeated': 'loadload'}", "4002"],
        },
        "variants": VARIANTS,
        "refine": {"prompt": "/refine remember how to check the work"},
        "compact": {"summary": SUMMARY},
        "notice": {
            "prompt": "Answer without tools",
            "title": text_actions.SWITCH_TITLE,
            "description": text_actions.REFUSED_NOTICE,
            "reply": NOTICE_REPLY,
        },
        "timeline": TIMELINE,
    }
    # No automatic harness review (after `/compact` it would race the next prompt for the next reply).
    config = tmp_path / "config.toml"
    config.write_text("auto_refine_every = 0\n", encoding="utf-8")
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    with ScriptedModelServer(script) as model:
        env = node_env(
            tmp_path,
            model.base_url,
            home=False,
            CONTINUAL_ACP_TEST_MARK=marker,  # inherited by both servers and their kernels
            CONTINUAL_ACP_CONFIG=str(config),
        )
        report = _node("run-session.mjs", str(plan_path), env=env)
        report["_requests"] = list(model.requests)
    report["_marker"] = marker
    return report


def test_official_sdk_client_runs_a_full_session_with_every_frame_schema_valid(
    session_report: dict[str, Any],
) -> None:
    report = session_report
    assert_run_clean(report)
    assert report["cancelMs"] is not None and report["cancelMs"] <= 2000
    assert report["frames"]["agent->client"] > 0 and report["frames"]["client->agent"] > 0
    assert report["ok"] is True
    # No server or kernel left behind.
    assert _processes_with_env("CONTINUAL_ACP_TEST_MARK", report["_marker"]) == []


# ------------------------------------------------------------------ the client variants


def _variant_step(report: dict[str, Any], variant: str, what: str) -> dict[str, Any]:
    """The step of `variant` whose name contains `what`; fails (with the stderr tail) unless it passed."""
    found = [s for s in report["steps"] if s["name"].startswith(f"{variant}: ") and what in s["name"]]
    assert len(found) == 1, f"step {variant}: ...{what}... not run: " + report["_stderr"][-2000:]
    assert found[0]["ok"], found[0]["detail"]
    detail: dict[str, Any] = found[0]["detail"]
    return detail


def test_a_node_client_that_opts_in_receives_harness_quiescence(session_report: dict[str, Any]) -> None:
    assert _variant_step(session_report, "opted-in", "/refine settles")["notifications"] > 0


def test_a_node_client_that_does_not_opt_in_receives_no_quiescence_notification_only_the_mirror(
    session_report: dict[str, Any],
) -> None:
    detail = _variant_step(session_report, "plain", "/refine settles")
    assert detail["notifications"] == 0 and detail["mirrors"] > 0


def test_a_node_client_with_session_compaction_receives_compaction_updates_for_compact(
    session_report: dict[str, Any],
) -> None:
    assert _variant_step(session_report, "opted-in", "/compact")["updates"] == 3


def test_a_node_client_without_session_compaction_gets_the_compact_reply_and_no_update(
    session_report: dict[str, Any],
) -> None:
    detail = _variant_step(session_report, "plain", "/compact")
    assert detail["updates"] == 0 and detail["reply"].startswith("Context compacted.")


def test_a_node_client_with_session_notices_receives_a_notice(session_report: dict[str, Any]) -> None:
    assert _variant_step(session_report, "opted-in", "refuses tools")["notices"] == 1


def test_a_node_client_without_session_notices_gets_the_notice_as_an_agent_message(
    session_report: dict[str, Any],
) -> None:
    assert _variant_step(session_report, "plain", "refuses tools")["notices"] == 0


def _step(report: dict[str, Any], prefix: str) -> dict[str, Any]:
    found = [s for s in report["steps"] if s["name"].startswith(prefix)]
    assert len(found) == 1, f"step {prefix}... not run: " + report["_stderr"][-2000:]
    assert found[0]["ok"], found[0]["detail"]
    detail: dict[str, Any] = found[0]["detail"] or {}
    return detail


def test_the_sdk_client_rewinds_a_variable_away_and_gets_it_back_by_loading_the_fork(
    session_report: dict[str, Any],
) -> None:
    assert _step(session_report, "timeline: _session/rewind")["removed"] == ["tc"]
    kernel = _step(session_report, "timeline: session/fork")["kernel"]
    assert kernel == "kernel variables as they are now: ta, tb, tc"
    assert TIMELINE["prompts"][2]["prompt"] in _step(session_report, "timeline: loading the fork")["replayed"]


def test_the_sdk_client_steers_a_running_turn_at_its_next_request_and_the_reload_replays_it(
    session_report: dict[str, Any],
) -> None:
    replayed = _step(session_report, "timeline: _session/steer")["replayed"]
    assert replayed[-2:] == [TIMELINE["steer"]["prompt"], STEER_TEXT]
    steered = [r for r in session_report["_requests"] if r["messages"][-1].get("content") == STEER_TEXT]
    assert len(steered) == 1
    # It joined after the cell's result, in the request that followed it.
    assert [m["role"] for m in steered[0]["messages"][-2:]] == ["tool", "user"]


def test_only_the_fork_the_client_asked_for_is_an_unstable_frame(session_report: dict[str, Any]) -> None:
    assert session_report["unstableFrames"] == [
        {"direction": "client->agent", "method": "session/fork"},
        {"direction": "agent->client", "method": "session/fork result"},
    ]


def _processes_with_env(key: str, value: str) -> list[str]:
    needle = f"{key}={value}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if needle in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(
                        (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    )
            except OSError:  # gone meanwhile, or not ours to read
                continue
    return found
