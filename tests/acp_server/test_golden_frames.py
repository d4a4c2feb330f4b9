"""Every frame builder in `acp_server.protocol.frames`, pinned by a golden file and checked against `acp.schema`.

Each case calls one builder with fixed inputs; the result must equal `tests/golden/<case>.json`
byte for byte (key order included: it is what goes on the wire), and, where ACP defines the
shape, survive `model_validate` + `model_dump(by_alias=True, exclude_unset=True)` unchanged (so no
key is unknown to the schema, misspelt, or of the wrong type). A guard fails when a public
builder has no golden file, or a golden file no case.

Regenerate the goldens deliberately, after a change you mean, with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/acp_server/test_golden_frames.py`
and review the diff of `tests/golden/` before committing it.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from acp_client import UNMODELLED, sdk_schema_problem, without_paths

from acp_server.harness.review_form import review_form
from acp_server.protocol import frames as f
from agent_core.control_plane.held import HeldChange, HeldFile
from agent_core.events import PlanEntry
from agent_core.refinement.records import PendingReview
from agent_core.user_question import question_form
from harness_store.models import HarnessState, Proposal

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@dataclass(frozen=True)
class _Command:
    name: str
    description: str
    hint: str | None = None


@dataclass(frozen=True)
class Case:
    build: Callable[[], object]
    model: str | None = None  # the acp.schema model the frame (or its `part`) is
    part: str | None = None  # validate this member of the frame instead of the whole frame
    each: bool = False  # the frame is a list: validate each item
    # A session update acp.schema does not model yet (notice, compaction): validated with jsonschema
    # against the stable v1 schema's SessionUpdate (acp_v1_session_update.schema.json).
    v1_update: bool = False
    # A `$defs` name of the npm SDK's v1 schemas: the frame is validated with jsonschema against the
    # unstable one (fields acp.schema 0.12 does not model: `subagent_update`, `sessionCapabilities.status`)
    # and, with `stable`, against the stable one too (an unstable field must not break a stable client).
    unstable: str | None = None
    stable: bool = False


CODE = "# load the data\nimport pandas as pd\ndf = pd.read_csv('data.csv')"
CELL_CONTENT = [f.tool_text("```python\n" + CODE + "\n```")]
OUTPUT_CONTENT = [*CELL_CONTENT, f.tool_text("```\n   a  b\n0  1  2\n```")]
TERMINAL_CONTENT = [*CELL_CONTENT, f.tool_terminal("call_1")]
DIFF = f.tool_diff("/work/notes.md", "old line\n", "new line\n")
REVIEW_RAW = {"proposalId": "p-1", "scope": "global", "edits": [{"action": "update", "kind": "note"}]}
MODES = [("ask", "Ask", "Ask before every cell"), ("auto", "Auto", "Cells run")]
MODE_OPTION = f.select_config_option(
    "mode", "Mode", description="How much the agent may do", category="mode", current="ask", choices=MODES
)
SANDBOXED = f.kernel_guarantees(
    "sandbox",
    "a local process in a bubblewrap sandbox",
    confined=True,
    tier="bubblewrap",
    network=False,
    approval_required=False,
    notes=["read-only: the rest of the system, the workspace's .git, the server's data dir"],
)
UNCONFINED = f.kernel_guarantees(
    "sandbox",
    "a local process, NOT confined",
    confined=False,
    tier=None,
    network=True,
    approval_required=True,
    notes=["sandbox unavailable: bubblewrap is not installed (apt-get install bubblewrap)"],
)
SETUP_TERMINAL = f.terminal_auth_method(
    "continual-acp-setup", "Set up a model", "Asks for the endpoint, key and model", ["setup"]
)
MODEL_OPTION = f.select_config_option(
    "model", "Model", description="The model", category="model", current="m1", choices=[("m1", "m1", "")]
)


def _review_form_request() -> object:
    """The form a review of a two-edit proposal goes out as (review_form.py's own schema)."""
    proposal = Proposal.model_validate(
        {
            "summary": "release notes",
            "edits": [
                {"action": "create", "kind": "memory", "id": "release", "content": "Ship with --sign."},
                {"action": "delete", "kind": "memory", "id": "old"},
            ],
        }
    )
    preview = [
        {"action": "create", "kind": "memory", "id": "release", "after": "Ship with --sign."},
        {"action": "delete", "kind": "memory", "id": "old"},
    ]
    message, schema = review_form(PendingReview("p-1", proposal, "local", "auto", HarnessState()), preview)
    return f.elicitation_form_request("sess-1", message, schema, tool_call_id="review-p-1")


def _held_form_request() -> object:
    """The form a cell's held change to `.continual-acp/` goes out as."""
    held = HeldChange(
        (HeldFile("/work/.continual-acp/gates.toml", b"a", b"b"),), "call_1", "code", "while the cell ran"
    )
    pending = PendingReview(
        "p-2", Proposal(summary="gates.toml"), "local", "model", HarnessState(), held=held
    )
    message, schema = review_form(pending, [])
    return f.elicitation_form_request("sess-1", message, schema, tool_call_id="review-p-2")


FORM_REQUEST = ("CreateFormSessionElicitationRequest", "CreateElicitationRequest")

CASES: dict[str, Case] = {
    # JSON-RPC envelopes
    "notification_message": Case(
        lambda: f.notification_message(
            "session/update", f.session_notification("sess-1", f.usage_update(1200, 128000))
        ),
        "SessionNotification",
        part="params",
    ),
    "request_message": Case(
        lambda: f.request_message(7, "fs/read_text_file", f.read_text_file_request("sess-1", "/work/a.py")),
        "ReadTextFileRequest",
        part="params",
    ),
    "result_message": Case(
        lambda: f.result_message(3, f.prompt_response("end_turn")), "PromptResponse", "result"
    ),
    "error_message": Case(
        lambda: f.error_message(None, f.rpc_error(-32700, "Parse error: Expecting value")), "Error", "error"
    ),
    "session_notification": Case(
        lambda: f.session_notification("sess-1", f.agent_message_update("Hello", "msg_1")),
        "SessionNotification",
    ),
    # errors
    "rpc_error__parse_error": Case(lambda: f.rpc_error(-32700, "Parse error: Expecting value"), "Error"),
    "rpc_error__invalid_request": Case(
        lambda: f.rpc_error(-32600, 'Invalid request: the "jsonrpc" member must be exactly "2.0"'), "Error"
    ),
    "rpc_error__oversized": Case(
        lambda: f.rpc_error(
            -32600,
            (
                "message of 70000 bytes exceeds the 65536-byte limit "
                "(CONTINUAL_ACP_MAX_MESSAGE_BYTES); it was skipped"
            ),
        ),
        "Error",
    ),
    "rpc_error__request_cancelled": Case(
        lambda: f.rpc_error(-32800, "session/list was cancelled by $/cancel_request"), "Error"
    ),
    "rpc_error__internal": Case(
        lambda: f.rpc_error(-32603, "Internal error in session/list: RuntimeError: boom"), "Error"
    ),
    "param_error": Case(lambda: f.param_error(["cwd"], "must be an absolute path", "value_error")),
    "invalid_params_error": Case(
        lambda: f.invalid_params_error(
            "cwd must be an absolute path, got 'rel'",
            [f.param_error(["cwd"], "must be an absolute path", "value_error")],
        ),
        "Error",
    ),
    "invalid_params_error__no_details": Case(
        lambda: f.invalid_params_error("_harness/history: limit must be a positive integer"), "Error"
    ),
    "session_not_found_error": Case(lambda: f.session_not_found_error("sess-404"), "Error"),
    "session_in_use_error": Case(
        lambda: f.session_in_use_error("session sess-1 is open in process 4242", "sess-1", 4242), "Error"
    ),
    "model_error": Case(
        lambda: f.model_error("the model endpoint answered 401: check the API key", "http://m/v1", 401),
        "Error",
    ),
    "data_dir_error": Case(
        lambda: f.data_dir_error("session/new: the data dir /ro cannot be written", "/ro", "Read-only"),
        "Error",
    ),
    "auth_required_error": Case(
        lambda: f.auth_required_error(
            "Authentication required: no model is set up yet. Run `continual-acp setup` in a terminal",
            "continual-acp-setup",
            "/home/me/.config/continual-acp/config.toml",
        ),
        "Error",
    ),
    "kernel_backend_error": Case(
        lambda: f.kernel_backend_error(
            "kernel backend 'sandbox': sandbox_tier = 'bubblewrap' is configured but bubblewrap is not installed",
            "sandbox",
        ),
        "Error",
    ),
    "config_error": Case(
        lambda: f.config_error(
            "the configuration is not valid: config file /home/u/.config/continual-acp/config.toml is not "
            "usable: not valid TOML: Invalid value (at line 2, column 9)",
            "",
            "/home/u/.config/continual-acp/config.toml",
            2,
        ),
        "Error",
    ),
    "rollback_refused_error": Case(
        lambda: f.rollback_refused_error(
            "r-2", ["note n-1 was edited since"], {"id": "r-3", "applied": False}, force=False
        ),
        "Error",
    ),
    # content blocks
    "text_block": Case(lambda: f.text_block("Hello"), "TextContentBlock"),
    "image_block": Case(lambda: f.image_block("iVBORw0KGgo=", "image/png"), "ImageContentBlock"),
    "image_block__with_uri": Case(
        lambda: f.image_block("iVBORw0KGgo=", "image/png", "file:///work/plot.png"), "ImageContentBlock"
    ),
    "resource_block__text": Case(
        lambda: f.resource_block("file:///work/a.py", text="x = 1\n", mime_type="text/x-python"),
        "EmbeddedResourceContentBlock",
    ),
    "resource_block__blob": Case(
        lambda: f.resource_block("file:///work/a.bin", blob="AAEC"), "EmbeddedResourceContentBlock"
    ),
    "resource_link_block": Case(
        lambda: f.resource_link_block("file:///work/a.csv", "a.csv", "text/csv"), "ResourceContentBlock"
    ),
    # tool call content
    "tool_content": Case(
        lambda: f.tool_content(f.image_block("iVBORw0KGgo=", "image/png")), "ContentToolCallContent"
    ),
    "tool_text": Case(lambda: f.tool_text("Error: not run"), "ContentToolCallContent"),
    "tool_diff": Case(lambda: DIFF, "FileEditToolCallContent"),
    "tool_diff__new_file": Case(
        lambda: f.tool_diff("/work/new.md", None, "hello\n"), "FileEditToolCallContent"
    ),
    "tool_terminal": Case(lambda: f.tool_terminal("call_1"), "TerminalToolCallContent"),
    "location": Case(lambda: f.location("/work/notes.md"), "ToolCallLocation"),
    "tool_call_fields": Case(
        lambda: f.tool_call_fields(
            "t-1",
            "Edit notes.md",
            kind="edit",
            status="completed",
            content=[DIFF],
            locations=[f.location("/work/notes.md")],
            raw_input={"path": "/work/notes.md"},
            raw_output={"ok": True},
            meta={"note": "x"},
        ),
        "ToolCallUpdate",
    ),
    "tool_call_update": Case(
        lambda: f.tool_call_update(
            f.tool_call_fields("t-1", "Look", kind="read", status="pending", content=[f.tool_text("a")])
        ),
        "ToolCallStart",
    ),
    # cell cards: every state
    "cell_tool_call": Case(
        lambda: f.cell_tool_call("call_1", "load the data", CODE, CELL_CONTENT), "ToolCallUpdate"
    ),
    # autonomous-mode gates and goals
    "gate_started_update": Case(
        lambda: f.gate_started_update(
            "gate_1", "Gate: pytest -q", [f.tool_text("```sh\npytest -q\n```")], "pytest -q"
        ),
        "ToolCallStart",
    ),
    "gate_progress_update": Case(
        lambda: f.gate_progress_update(
            "gate_1", [f.tool_text("```sh\npytest -q\n```"), f.tool_text("```\n1 failed\n```")]
        ),
        "ToolCallProgress",
    ),
    "gate_finished_update__failed": Case(
        lambda: f.gate_finished_update(
            "gate_1",
            [f.tool_text("```sh\npytest -q\n```"), f.tool_text("```\n1 failed\n```")],
            passed=False,
            exit_code=1,
            summary="failed (exit code 1)",
            not_rerun=False,
        ),
        "ToolCallProgress",
    ),
    "gate_finished_update__not_rerun": Case(
        lambda: f.gate_finished_update(
            "gate_2",
            [f.tool_text("```sh\npytest -q\n```"), f.tool_text("not rerun: workspace unchanged")],
            passed=False,
            exit_code=None,
            summary="not rerun: workspace unchanged",
            not_rerun=True,
        ),
        "ToolCallProgress",
    ),
    "gate_finished_update__passed": Case(
        lambda: f.gate_finished_update(
            "gate_3",
            [f.tool_text("```sh\npytest -q\n```")],
            passed=True,
            exit_code=0,
            summary="passed",
            not_rerun=False,
        ),
        "ToolCallProgress",
    ),
    "gates_confirm_tool_call": Case(
        lambda: f.gates_confirm_tool_call(
            "gates-1", "Use these gates?", ["python3 -m pytest -q", "npm test"]
        ),
        "ToolCallUpdate",
    ),
    "gates_confirm_settled_update__confirmed": Case(
        lambda: f.gates_confirm_settled_update("gates-1", confirmed=True), "ToolCallProgress"
    ),
    "gates_confirm_settled_update__declined": Case(
        lambda: f.gates_confirm_settled_update("gates-1", confirmed=False), "ToolCallProgress"
    ),
    "goal_info_update": Case(
        lambda: f.goal_info_update({"objective": "ship it", "state": "active", "status": "active: ship it"}),
        "SessionInfoUpdate",
    ),
    "goal_info_update__cleared": Case(lambda: f.goal_info_update(None), "SessionInfoUpdate"),
    "cell_started_update": Case(
        lambda: f.cell_started_update("call_1", "load the data", CODE, CELL_CONTENT), "ToolCallStart"
    ),
    "cell_started_update__terminal": Case(
        lambda: f.cell_started_update(
            "call_1", "load the data", CODE, TERMINAL_CONTENT, terminal_cwd="/work"
        ),
        "ToolCallStart",
    ),
    "cell_running_update": Case(lambda: f.cell_running_update("call_1"), "ToolCallProgress"),
    "cell_progress_update": Case(
        lambda: f.cell_progress_update("call_1", OUTPUT_CONTENT), "ToolCallProgress"
    ),
    "cell_progress_update__diff": Case(
        lambda: f.cell_progress_update(
            "call_1", [*CELL_CONTENT, DIFF], locations=[f.location("/work/notes.md")]
        ),
        "ToolCallProgress",
    ),
    "cell_progress_update__terminal": Case(
        lambda: f.cell_progress_update("call_1", TERMINAL_CONTENT, terminal_data="   a  b\r\n0  1  2\r\n"),
        "ToolCallProgress",
    ),
    "cell_finished_update__completed": Case(
        lambda: f.cell_finished_update("call_1", OUTPUT_CONTENT, outcome="completed"), "ToolCallProgress"
    ),
    "cell_finished_update__failed": Case(
        lambda: f.cell_finished_update(
            "call_1",
            [*CELL_CONTENT, f.tool_text("```\nNameError: name 'pd' is not defined\n```")],
            outcome="failed",
            error="NameError: name 'pd' is not defined",
        ),
        "ToolCallProgress",
    ),
    "cell_finished_update__cancelled": Case(
        lambda: f.cell_finished_update(
            "call_1",
            [*CELL_CONTENT, f.tool_text("Error: cancelled before it ran")],
            outcome="cancelled",
            error="rejected by the user",
        ),
        "ToolCallProgress",
    ),
    "cell_finished_update__terminal": Case(
        lambda: f.cell_finished_update(
            "call_1", TERMINAL_CONTENT, outcome="completed", terminal=True, terminal_data="done\r\n"
        ),
        "ToolCallProgress",
    ),
    "cell_finished_update__terminal_cancelled": Case(
        lambda: f.cell_finished_update(
            "call_1",
            [*TERMINAL_CONTENT, f.tool_text("Error: cancelled (the cell was interrupted)")],
            outcome="cancelled",
            terminal=True,
        ),
        "ToolCallProgress",
    ),
    "edit_card_update": Case(
        lambda: f.edit_card_update("edit-turn-1", "Edit notes.md", "/work/notes.md", "old\n", "new\n"),
        "ToolCallStart",
    ),
    # refinement cards and review
    "refinement_card_update__applied": Case(
        lambda: f.refinement_card_update(
            "r-1", "remember the test command", "local", applied=True, content=[DIFF]
        ),
        "ToolCallStart",
    ),
    "refinement_card_update__path_titled": Case(
        lambda: f.refinement_card_update(
            "r-1",
            "remember the test command",
            "local",
            applied=True,
            content=[f.tool_text("Refine harness - remember the test command")],
            title="Refine harness - remember the test command",
        ),
        "ToolCallStart",
    ),
    "refinement_card_update__refused": Case(
        lambda: f.refinement_card_update(
            "r-2",
            "drop a note",
            "global",
            applied=False,
            content=[f.tool_text("delete note n-1"), f.tool_text("Error: n-1 is pinned")],
        ),
        "ToolCallStart",
    ),
    "refinement_message_update__applied": Case(
        lambda: f.refinement_message_update("r-1", "remember the test command", "local", applied=True),
        "AgentMessageChunk",
    ),
    "refinement_message_update__refused": Case(
        lambda: f.refinement_message_update("r-2", "drop a note", "global", applied=False),
        "AgentMessageChunk",
    ),
    "refinement_message_update__failed": Case(
        lambda: f.refinement_message_update(
            "r-3",
            "Refinement failed",
            "local",
            applied=False,
            failure="the model's reply is not valid JSON: Expecting value at 0",
        ),
        "AgentMessageChunk",
    ),
    "review_card": Case(lambda: f.review_card("p-1", "tidy notes", [DIFF], REVIEW_RAW), "ToolCallUpdate"),
    "review_card__no_summary": Case(lambda: f.review_card("p-1", None, [DIFF], REVIEW_RAW), "ToolCallUpdate"),
    "session_status_response": Case(lambda: f.session_status_response("saved")),
    "fork_session_response": Case(
        lambda: f.fork_session_response(
            "sess-2",
            f.session_modes("ask", MODES),
            [MODE_OPTION],
            forked_from="sess-1",
            before_prompt=2,
            kernel_note="kernel variables from before that prompt: x",
        ),
        "ForkSessionResponse",
    ),
    "confirm_card": Case(
        lambda: f.confirm_card(
            "rewind-files-1", "Revert these file changes?", [f.tool_text("```diff\n-a\n+b\n```")]
        ),
        "ToolCallUpdate",
    ),
    "permission_request__rewind_refinements": Case(
        lambda: f.permission_request(
            "sess-1",
            f.confirm_card("rewind-refinements-1", "Also roll back?", [f.tool_text("- `r-1` (local): x")]),
            f.permission_options(f.REWIND_REFINEMENTS_OPTIONS),
        ),
        "RequestPermissionRequest",
    ),
    "review_settled_update__applied": Case(
        lambda: f.review_settled_update("p-1", applied=True), "ToolCallProgress"
    ),
    "review_settled_update__rejected": Case(
        lambda: f.review_settled_update("p-1", applied=False), "ToolCallProgress"
    ),
    "review_waiting_update": Case(lambda: f.review_waiting_update("p-1"), "AgentMessageChunk"),
    "permission_options__cell": Case(
        lambda: f.permission_options(f.PERMISSION_OPTIONS), "PermissionOption", each=True
    ),
    "permission_options__review": Case(
        lambda: f.permission_options(f.REVIEW_OPTIONS), "PermissionOption", each=True
    ),
    "permission_request__cell": Case(
        lambda: f.permission_request(
            "sess-1",
            f.cell_tool_call("call_1", "load the data", CODE, CELL_CONTENT),
            f.permission_options(f.PERMISSION_OPTIONS),
        ),
        "RequestPermissionRequest",
    ),
    "permission_request__subagent": Case(
        lambda: f.permission_request(
            "sess-1",
            f.cell_tool_call("tests-call_1", "[subagent tests] load the data", CODE, CELL_CONTENT),
            f.permission_options(f.PERMISSION_OPTIONS),
            f.subagent_meta("sess-2", "tests", "needs-action", "sess-1"),
        ),
        "RequestPermissionRequest",
    ),
    "cancel_request_notification": Case(
        lambda: f.cancel_request_notification(7), "CancelRequestNotification"
    ),
    "permission_request__review": Case(
        lambda: f.permission_request(
            "sess-1",
            f.review_card("p-1", "tidy notes", [DIFF], REVIEW_RAW),
            f.permission_options(f.REVIEW_OPTIONS),
        ),
        "RequestPermissionRequest",
    ),
    # quiescence: the `_harness/quiescence` params are ours; the mirror is a session_info_update
    "anchored_rewind_response": Case(lambda: f.anchored_rewind_response(True)),
    "elicitation_form_request": Case(
        lambda: f.elicitation_form_request(
            "sess-1",
            "Review the harness edits: a release note",
            {
                "type": "object",
                "properties": {
                    "edit_0": {
                        "type": "string",
                        "title": "create memory release",
                        "oneOf": [
                            {"const": "accept", "title": "Accept"},
                            {"const": "reject", "title": "Reject"},
                        ],
                        "default": "accept",
                    },
                    "reason": {"type": "string", "title": "Reason (optional; kept with a rejection)"},
                    "remember": {"type": "boolean", "title": "Remember", "default": False},
                },
                "required": ["edit_0"],
            },
            tool_call_id="review-p-1",
        ),
        "CreateFormSessionElicitationRequest",
        unstable="CreateElicitationRequest",
        stable=True,
    ),
    "elicitation_form_request__review": Case(
        _review_form_request, FORM_REQUEST[0], unstable=FORM_REQUEST[1], stable=True
    ),
    "elicitation_form_request__held": Case(
        _held_form_request, FORM_REQUEST[0], unstable=FORM_REQUEST[1], stable=True
    ),
    # `editor.ask` from a cell: a choice, and free text
    "elicitation_form_request__question": Case(
        lambda: f.elicitation_form_request("sess-1", "Release now?", question_form(["yes", "not yet"])),
        FORM_REQUEST[0],
        unstable=FORM_REQUEST[1],
        stable=True,
    ),
    "elicitation_form_request__question_text": Case(
        lambda: f.elicitation_form_request("sess-1", "Which branch?", question_form(None)),
        FORM_REQUEST[0],
        unstable=FORM_REQUEST[1],
        stable=True,
    ),
    "rewind_response": Case(
        lambda: f.rewind_response(
            True,
            2,
            2,
            "/data/sessions/s/rewind-1.jsonl",
            {"restored": ["x"], "removed": ["y", "z"]},
            "",
            "",
            ["r-1"],
            [],
        )
    ),
    "quiescence_state": Case(lambda: f.quiescence_state(False, 1, None)),
    "quiescence_notification__busy": Case(lambda: f.quiescence_notification("sess-1", False, 2, None)),
    "quiescence_notification__settled": Case(lambda: f.quiescence_notification("sess-1", True, 0, "r-1")),
    "quiescence_mirror_update__busy": Case(
        lambda: f.quiescence_mirror_update(False, 2, None), "SessionInfoUpdate"
    ),
    "quiescence_mirror_update__settled": Case(
        lambda: f.quiescence_mirror_update(True, 0, "r-1"), "SessionInfoUpdate"
    ),
    "quiescence_mirror_update__refining": Case(
        lambda: f.quiescence_mirror_update(
            False, 1, None, [f.background_item("refinement", "running-1", "Refining the harness")]
        ),
        "SessionInfoUpdate",
    ),
    "background_item": Case(lambda: f.background_item("refinement", "queued-1", "Harness refinement queued")),
    # ACP v1 notices and compaction (newer than acp.schema)
    "notice_update": Case(
        lambda: f.notice_update("warning", "The kernel died and was replaced", "Variables restored."),
        v1_update=True,
    ),
    "notice_update__title_only": Case(lambda: f.notice_update("info", "MCP server started"), v1_update=True),
    "compaction_update": Case(lambda: f.compaction_update("compaction_1", "in_progress"), v1_update=True),
    "compaction_update__failed": Case(
        lambda: f.compaction_update("compaction_1", "failed", "the model endpoint timed out"), v1_update=True
    ),
    "compaction_summary_chunk_update": Case(
        lambda: f.compaction_summary_chunk_update("compaction_1", "The user asked for a plot; done."),
        v1_update=True,
    ),
    "quiescence_mirror_update__child_running": Case(
        lambda: f.quiescence_mirror_update(
            True, 0, "r-1", [f.background_session("sess-2", "tests", "running", "sess-1")]
        ),
        "SessionInfoUpdate",
    ),
    # messages, plan, usage, info, commands, modes
    "agent_message_update": Case(lambda: f.agent_message_update("Hello", "msg_1"), "AgentMessageChunk"),
    "agent_message_update__no_id": Case(lambda: f.agent_message_update("Hello"), "AgentMessageChunk"),
    "agent_thought_update": Case(lambda: f.agent_thought_update("Thinking", "msg_1"), "AgentThoughtChunk"),
    "user_message_update": Case(
        lambda: f.user_message_update(f.text_block("plot the data"), "msg_0"), "UserMessageChunk"
    ),
    "plan_update": Case(
        lambda: f.plan_update(
            [PlanEntry("Load the data", "completed", "high"), PlanEntry("Plot it", "in_progress", "medium")]
        ),
        "AgentPlanUpdate",
    ),
    "subagent_update": Case(
        lambda: f.subagent_update("child-1", "tests", "run the tests", "needs-action", "parent-1"),
        unstable="SessionUpdate",
    ),
    "plan_update_by_id": Case(
        lambda: f.plan_update_by_id("session", [PlanEntry("Load the data", "completed", "high")]),
        unstable="SessionUpdate",
    ),
    "usage_update": Case(lambda: f.usage_update(1200, 128000), "UsageUpdate"),
    "session_title_update": Case(lambda: f.session_title_update("Plot the data"), "SessionInfoUpdate"),
    "available_commands_update": Case(
        lambda: f.available_commands_update(
            [_Command("history", "Show recent refinements", "number of entries"), _Command("undo", "Undo")]
        ),
        "AvailableCommandsUpdate",
    ),
    "current_mode_update": Case(lambda: f.current_mode_update("auto"), "CurrentModeUpdate"),
    "config_option_update": Case(
        lambda: f.config_option_update([MODE_OPTION, MODEL_OPTION]), "ConfigOptionUpdate"
    ),
    "session_modes": Case(lambda: f.session_modes("ask", MODES), "SessionModeState"),
    "select_config_option": Case(lambda: MODE_OPTION, "SessionConfigOptionSelect"),
    # responses
    "initialize_response": Case(
        lambda: f.initialize_response(
            protocol_version=1,
            name="continual-acp",
            title="Continual ACP",
            version="0.1.0",
            extension_version=1,
            extension_methods=["_harness/state", "_harness/status"],
            extension_notifications=["_harness/quiescence"],
            auth_methods=[SETUP_TERMINAL],
        ),
        "InitializeResponse",
        unstable="InitializeResponse",
        stable=True,
    ),
    "terminal_auth_method": Case(lambda: SETUP_TERMINAL, "TerminalAuthMethod"),
    "agent_auth_method": Case(
        lambda: f.agent_auth_method("continual-acp-setup", "Set up a model", "Run `continual-acp setup`"),
        "AuthMethodAgent",
    ),
    "agent_auth_method__terminal_meta": Case(
        lambda: f.agent_auth_method(
            "continual-acp-setup",
            "Set up a model",
            "Run `continual-acp setup`",
            ["/venv/bin/python", "-m", "acp_server", "setup"],
        ),
        "AuthMethodAgent",
    ),
    "new_session_response": Case(
        lambda: f.new_session_response("sess-1", f.session_modes("ask", MODES), [MODE_OPTION], SANDBOXED),
        "NewSessionResponse",
    ),
    "new_session_response__no_kernel_pool": Case(
        lambda: f.new_session_response("sess-1", f.session_modes("ask", MODES), [MODE_OPTION]),
        "NewSessionResponse",
    ),
    "session_setup_response": Case(
        lambda: f.session_setup_response(f.session_modes("ask", MODES), [MODE_OPTION], UNCONFINED),
        "LoadSessionResponse",
    ),
    "kernel_guarantees": Case(lambda: SANDBOXED),
    "session_list_entry": Case(
        lambda: f.session_list_entry("sess-1", "/work", "Plot the data", "2026-12-01T09:00:00Z"),
        "SessionInfo",
    ),
    "session_list_entry__bare": Case(lambda: f.session_list_entry("sess-2", "/work"), "SessionInfo"),
    "list_sessions_response": Case(
        lambda: f.list_sessions_response([f.session_list_entry("sess-1", "/work")], "sess-1"),
        "ListSessionsResponse",
    ),
    "list_sessions_response__last_page": Case(lambda: f.list_sessions_response([]), "ListSessionsResponse"),
    "config_options_response": Case(
        lambda: f.config_options_response([MODE_OPTION]), "SetSessionConfigOptionResponse"
    ),
    "prompt_response__end_turn": Case(lambda: f.prompt_response("end_turn"), "PromptResponse"),
    "prompt_response__cancelled": Case(lambda: f.prompt_response("cancelled"), "PromptResponse"),
    "prompt_response__usage": Case(
        lambda: f.prompt_response("end_turn", f.turn_usage(1200, 80, 3000, 0)),
        "PromptResponse",
        unstable="PromptResponse",
        stable=True,
    ),
    "turn_usage": Case(lambda: f.turn_usage(1200, 80, 3000, 40), "Usage", unstable="Usage"),
    "empty_response": Case(f.empty_response, "CloseSessionResponse"),
    # `_harness/*` answers (extension shapes: no ACP model)
    "harness_status_response": Case(lambda: f.harness_status_response(False, 1, 1, 0, "r-1")),
    "harness_status_response__idle": Case(lambda: f.harness_status_response(True, 0, 0, 0, None)),
    "await_quiescence_response": Case(lambda: f.await_quiescence_response(True, "r-1")),
    "harness_state_response": Case(
        lambda: f.harness_state_response(
            [{"key": "note:n-1", "kind": "note", "id": "n-1", "content": "run make check"}],
            [{"kind": "note", "id": "n-0"}],
        )
    ),
    "harness_state_response__paged": Case(
        lambda: f.harness_state_response(
            [{"key": "n-1", "kind": "memory", "id": "n-1", "content": "run make check"}],
            [],
            "WzEsWyJzIiwibWVyZ2VkIixudWxsLG51bGxdLFsibWVtb3J5Iiwibi0xIl1d",
            12,
        )
    ),
    "harness_history_response": Case(
        lambda: f.harness_history_response(
            [{"id": "r-2", "summary": "tidy"}, {"id": "r-1", "summary": "add"}], "r-1"
        )
    ),
    # client file system
    "read_text_file_request": Case(
        lambda: f.read_text_file_request("sess-1", "/work/a.py"), "ReadTextFileRequest"
    ),
    "write_text_file_request": Case(
        lambda: f.write_text_file_request("sess-1", "/work/a.py", "x = 1\n"), "WriteTextFileRequest"
    ),
    # subagents
    "subagent_info": Case(lambda: f.subagent_info("sess-2", "tests", "queued", "sess-1")),
    "subagent_meta": Case(lambda: f.subagent_meta("sess-2", "tests", "running", "sess-1")),
    "subagent_card_update": Case(
        lambda: f.subagent_card_update("sess-2", "tests", "Run the tests\nand report", "queued", "sess-1"),
        "ToolCallStart",
    ),
    "subagent_progress_update__running": Case(
        lambda: f.subagent_progress_update(
            "sess-2", "tests", "running", "sess-1", [f.tool_text("Run the tests")]
        ),
        "ToolCallProgress",
    ),
    "subagent_progress_update__finished": Case(
        lambda: f.subagent_progress_update(
            "sess-2",
            "tests",
            "finished",
            "sess-1",
            [f.tool_text("Run the tests"), f.tool_text("All 12 pass.")],
        ),
        "ToolCallProgress",
    ),
    "subagent_progress_update__failed": Case(
        lambda: f.subagent_progress_update(
            "sess-2", "tests", "failed", "sess-1", [f.tool_text("**failed:** its kernel died")]
        ),
        "ToolCallProgress",
    ),
    "background_session": Case(lambda: f.background_session("sess-2", "tests", "queued", "sess-1")),
    "subagent_link_meta": Case(lambda: f.subagent_link_meta("sess-1", "tests", "interrupted")),
    "session_list_entry__subagent": Case(
        lambda: {
            **f.session_list_entry("sess-2", "/work", "Run the tests"),
            "_meta": f.subagent_link_meta("sess-1", "tests", "finished"),
        },
        "SessionInfo",
    ),
}


def _builders() -> set[str]:
    return {
        name
        for name, obj in inspect.getmembers(f, inspect.isfunction)
        if obj.__module__ == f.__name__ and not name.startswith("_")
    }


def _render(frame: object) -> str:
    return json.dumps(frame, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_frame_matches_its_golden_file(case: str) -> None:
    path = GOLDEN / f"{case}.json"
    text = _render(CASES[case].build())
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path.name}; create it with UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", sorted(name for name, c in CASES.items() if c.model))
def test_frame_round_trips_through_its_acp_schema_model(case: str) -> None:
    from acp import schema

    spec = CASES[case]
    assert spec.model is not None
    frame = spec.build()
    target = frame[spec.part] if spec.part and isinstance(frame, dict) else frame
    model = getattr(schema, spec.model)
    items = target if spec.each and isinstance(target, list) else [target]
    for item in items:
        # Unstable fields acp.schema 0.12 does not model are checked by the SDK schema test instead.
        item = without_paths(item, UNMODELLED.get(spec.model, ()))
        dumped = model.model_validate(item).model_dump(mode="json", by_alias=True, exclude_unset=True)
        assert dumped == item


SDK_SCHEMAS = Path(__file__).resolve().parents[1] / "conformance/node_modules/@agentclientprotocol/sdk/schema"


def sdk_schema_check(frame: object, name: str, schema_file: str) -> str | None:
    """None if `frame` is a valid `$defs[name]` of one of the npm SDK's schemas, else the problem."""
    return sdk_schema_problem(SDK_SCHEMAS / schema_file, name, frame, schema_file)


@pytest.mark.parametrize("case", sorted(name for name, c in CASES.items() if c.unstable))
def test_frame_is_valid_against_the_sdk_schemas(case: str) -> None:
    spec = CASES[case]
    assert spec.unstable is not None
    assert sdk_schema_check(spec.build(), spec.unstable, "v1/schema.unstable.json") is None
    if spec.stable:
        assert sdk_schema_check(spec.build(), spec.unstable, "v1/schema.json") is None


def test_the_sdk_schema_check_rejects_a_usage_without_its_total() -> None:
    usage = f.turn_usage(1, 2, 3, 4)
    del usage["totalTokens"]
    assert sdk_schema_check(usage, "Usage", "v1/schema.unstable.json") is not None


@pytest.mark.parametrize("case", sorted(name for name, c in CASES.items() if c.v1_update))
def test_frame_is_a_valid_v1_session_update(case: str) -> None:
    import jsonschema

    schema = json.loads((Path(__file__).with_name("acp_v1_session_update.schema.json")).read_text())
    jsonschema.validate(CASES[case].build(), schema)


def test_the_v1_schema_check_rejects_a_notice_without_a_title() -> None:
    import jsonschema

    schema = json.loads((Path(__file__).with_name("acp_v1_session_update.schema.json")).read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"sessionUpdate": "notice", "severity": "info", "title": ""}, schema)


def test_every_builder_has_a_golden_file() -> None:
    covered = {case.split("__")[0] for case in CASES}
    golden = {path.name.split("__")[0].removesuffix(".json") for path in GOLDEN.glob("*.json")}
    assert sorted(_builders() - covered) == [], "builders without a golden case"
    assert sorted(_builders() - golden) == [], "builders without a golden file"


def test_every_golden_file_belongs_to_a_builder_case() -> None:
    files = {path.stem for path in GOLDEN.glob("*.json")}
    assert sorted(files - set(CASES)) == [], "golden files no case produces"
    assert sorted(case for case in CASES if case.split("__")[0] not in _builders()) == []


def test_frames_does_not_import_the_wire_models() -> None:
    # Startup speed: `initialize` is built from frames before acp.schema is loaded (docs/design-notes.md).
    import subprocess
    import sys

    code = (
        "import sys, acp_server.protocol.frames; print('acp.schema' in sys.modules or 'acp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
