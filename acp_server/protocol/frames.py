"""Builders for every frame the server writes: session updates, responses, requests, errors.

Each builder is a small pure function returning a plain dict, ready for `json.dumps`, in one fixed
key order (the golden files in `tests/golden/` pin both the shape and that order). Nothing here does
I/O or imports `acp.schema`: `initialize` is answered before the wire models are loaded (docs/design-notes.md,
"Fast start"), and a dict costs nothing to build. The golden tests round-trip every frame through
the `acp.schema` models instead.

Naming: a builder is named for the frame it makes; `*_update` builders make the `update` object of a
`session/update` notification, `*_response` builders a result, `*_request` builders the params of
an agent->client request, `*_error` builders the `error` object of an error answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

Frame = dict[str, object]
"""A JSON object as it goes on the wire (values are JSON values)."""

JSONRPC = "2.0"
# The key of our extension data under `_meta` (capabilities, the quiescence mirror).
META_KEY = "continual-acp"
QUIESCENCE = "_harness/quiescence"

# JSON-RPC error codes on the ACP wire (re-exported by `errors.py`).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002
# Application error: the store refused a rollback (data names the edits).
ROLLBACK_REFUSED = -32010
# Application error: the configured kernel backend cannot start kernels (data names the backend).
KERNEL_BACKEND_UNAVAILABLE = -32011
# Application error: the server's configuration is not valid (data names the setting or the file).
CONFIG_INVALID = -32012

PERMISSION_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("allow_once", "Allow once", "allow_once"),
    ("allow_always", "Allow always (this session)", "allow_always"),
    ("reject", "Reject", "reject_once"),
)
# Confirming the gate commands autonomous mode trusts to decide "done".
GATE_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("allow_once", "Use these gates", "allow_once"),
    ("reject", "Do not use them", "reject_once"),
)
# A rewind's questions: undo the workspace diff first; roll back the refinements made since.
REWIND_FILES_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("revert", "Rewind and revert these files", "allow_once"),
    ("keep", "Do not rewind", "reject_once"),
)
REWIND_REFINEMENTS_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("rollback", "Roll them back too", "allow_once"),
    ("keep", "Keep them", "reject_once"),
)
REVIEW_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("apply", "Apply", "allow_once"),
    ("apply_always", "Apply, and trust this kind of edit for the session", "allow_always"),
    ("reject", "Reject", "reject_once"),
    ("reject_forever", "Reject, and never propose this again", "reject_always"),
)


class PlanItem(Protocol):
    """One plan entry as agent_core reports it."""

    @property
    def content(self) -> str: ...

    @property
    def priority(self) -> str: ...

    @property
    def status(self) -> str: ...


class Command(Protocol):
    """One advertised slash command."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def hint(self) -> str | None: ...


# ---------------------------------------------------------------- JSON-RPC envelopes


def notification_message(method: str, params: object) -> Frame:
    """A JSON-RPC notification."""
    return {"jsonrpc": JSONRPC, "method": method, "params": params}


def request_message(request_id: int | str, method: str, params: object) -> Frame:
    """An agent->client JSON-RPC request."""
    return {"jsonrpc": JSONRPC, "id": request_id, "method": method, "params": params}


def result_message(request_id: object, result: object) -> Frame:
    """A success answer."""
    return {"jsonrpc": JSONRPC, "id": request_id, "result": result}


def error_message(request_id: object, error: Mapping[str, object]) -> Frame:
    """An error answer carrying one `*_error` object (`request_id` None when it could not be read)."""
    return {"jsonrpc": JSONRPC, "id": request_id, "error": dict(error)}


def session_notification(session_id: str, update: Mapping[str, object]) -> Frame:
    """The params of `session/update`: one update for one session."""
    return {"sessionId": session_id, "update": dict(update)}


# ---------------------------------------------------------------- errors


def rpc_error(code: int, message: str, data: object = None) -> Frame:
    """A JSON-RPC error object; `data` is left out when None."""
    error: Frame = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


def param_error(loc: Sequence[str], msg: str, kind: str) -> Frame:
    """One entry of an invalid-params error's `data.errors` (the pydantic error shape, trimmed)."""
    return {"loc": list(loc), "msg": msg, "type": kind}


def invalid_params_error(message: str, errors: Sequence[Mapping[str, object]] | None = None) -> Frame:
    """-32602; with `errors`, `data` is `{"errors": [...]}` (each a `param_error`)."""
    data = {"errors": [dict(e) for e in errors]} if errors is not None else None
    return rpc_error(INVALID_PARAMS, message, data)


def session_not_found_error(session_id: str) -> Frame:
    """-32002 for a session that is not open and not on disk."""
    return rpc_error(
        RESOURCE_NOT_FOUND,
        f"Unknown session {session_id!r}: it is not open and not on disk; start one with session/new",
        {"sessionId": session_id},
    )


def session_in_use_error(message: str, session_id: str, owner_pid: int | None) -> Frame:
    """-32600: another continual-acp process holds the session's owner lock."""
    return rpc_error(INVALID_REQUEST, message, {"sessionId": session_id, "ownerPid": owner_pid})


def model_error(message: str, endpoint: str | None, status: int | None) -> Frame:
    """-32603 answering a prompt whose model call failed for good (which endpoint, which status)."""
    return rpc_error(INTERNAL_ERROR, message, {"endpoint": endpoint, "status": status})


def data_dir_error(message: str, home: str, why: str) -> Frame:
    """-32603: the data dir cannot be created or written."""
    return rpc_error(INTERNAL_ERROR, message, {"home": home, "error": why})


def auth_required_error(message: str, method_id: str, config_file: str) -> Frame:
    """-32000: no model is set up yet; `message` names `continual-acp setup`, `data` the auth method
    that fixes it and the config file it writes."""
    return rpc_error(AUTH_REQUIRED, message, {"authMethodId": method_id, "configFile": config_file})


def kernel_backend_error(message: str, backend: str) -> Frame:
    """-32011: session/new, load or resume found the kernel backend unable to start kernels
    (`message` names the backend and the fix; `data.backend` is the configured kind)."""
    return rpc_error(KERNEL_BACKEND_UNAVAILABLE, message, {"backend": backend})


def config_error(message: str, setting: str, source: str, line: int | None) -> Frame:
    """-32012: session/new, load or resume cannot run because a setting or `config.toml` is not
    valid (`message` names the key or the file and line; nothing falls back to defaults)."""
    data: dict[str, object] = {"setting": setting, "source": source}
    if line is not None:
        data["line"] = line
    return rpc_error(CONFIG_INVALID, message, data)


def rollback_refused_error(
    refinement_id: str, errors: Sequence[str], result: Mapping[str, object], *, force: bool
) -> Frame:
    """-32010: the store refused a rollback; `data` names the edits and carries the refused result."""
    message = (
        f"rollback of {refinement_id} was refused: "
        + "; ".join(errors)
        + ("" if force else " (pass force: true to override)")
    )
    return rpc_error(
        ROLLBACK_REFUSED,
        message,
        {"refinementId": refinement_id, "errors": list(errors), "result": dict(result)},
    )


# ---------------------------------------------------------------- content blocks


def text_block(text: str) -> Frame:
    """A text content block."""
    return {"type": "text", "text": text}


def image_block(data: str, mime_type: str, uri: str | None = None) -> Frame:
    """An image content block (base64 `data`)."""
    block: Frame = {"type": "image", "data": data, "mimeType": mime_type}
    if uri:
        block["uri"] = uri
    return block


def resource_block(
    uri: str, *, text: str | None = None, blob: str | None = None, mime_type: str | None = None
) -> Frame:
    """An embedded resource block: `blob` when given, else `text` (empty when neither)."""
    resource: Frame = {"uri": uri}
    if blob is not None:
        resource["blob"] = blob
    else:
        resource["text"] = text or ""
    if mime_type:
        resource["mimeType"] = mime_type
    return {"type": "resource", "resource": resource}


def resource_link_block(uri: str, name: str, mime_type: str | None = None) -> Frame:
    """A resource link block."""
    link: Frame = {"type": "resource_link", "uri": uri, "name": name}
    if mime_type:
        link["mimeType"] = mime_type
    return link


# ---------------------------------------------------------------- tool call content


def tool_content(block: Mapping[str, object]) -> Frame:
    """A content block as tool call content."""
    return {"type": "content", "content": dict(block)}


def tool_text(text: str) -> Frame:
    """Text (markdown) as tool call content."""
    return tool_content(text_block(text))


def tool_diff(path: str, old_text: str | None, new_text: str) -> Frame:
    """A diff as tool call content; `oldText` is sent as null for a new file."""
    return {"type": "diff", "path": path, "oldText": old_text, "newText": new_text}


def tool_terminal(terminal_id: str) -> Frame:
    """A terminal reference as tool call content (Zed's terminal trio)."""
    return {"type": "terminal", "terminalId": terminal_id}


def location(path: str) -> Frame:
    """A file location a tool call touches."""
    return {"path": path}


def tool_call_fields(
    tool_call_id: str,
    title: str,
    *,
    kind: str,
    status: str,
    content: Sequence[Mapping[str, object]],
    locations: Sequence[Mapping[str, object]] = (),
    raw_input: Mapping[str, object] | None = None,
    raw_output: Mapping[str, object] | None = None,
    meta: Mapping[str, object] | None = None,
) -> Frame:
    """A complete tool call without `sessionUpdate`: the `toolCall` of a permission request."""
    fields: Frame = {
        "toolCallId": tool_call_id,
        "title": title,
        "kind": kind,
        "status": status,
        "content": [dict(c) for c in content],
    }
    if locations:
        fields["locations"] = [dict(loc) for loc in locations]
    if raw_input is not None:
        fields["rawInput"] = dict(raw_input)
    if raw_output is not None:
        fields["rawOutput"] = dict(raw_output)
    if meta is not None:
        fields["_meta"] = dict(meta)
    return fields


def tool_call_update(tool_call: Mapping[str, object]) -> Frame:
    """`tool_call`: a new card (from `tool_call_fields`)."""
    return {"sessionUpdate": "tool_call", **tool_call}


# ---------------------------------------------------------------- cell cards


def cell_tool_call(
    cell_id: str, title: str, code: str, content: Sequence[Mapping[str, object]], *, status: str = "pending"
) -> Frame:
    """A cell as a tool call (kind `execute`, `rawInput {code}`): the permission request's `toolCall`."""
    return tool_call_fields(
        cell_id, title, kind="execute", status=status, content=content, raw_input={"code": code}
    )


def cell_started_update(
    cell_id: str,
    title: str,
    code: str,
    content: Sequence[Mapping[str, object]],
    *,
    terminal_cwd: str | None = None,
) -> Frame:
    """`tool_call` opening a cell's card (pending); with a terminal, `_meta.terminal_info`."""
    meta = (
        {"terminal_info": {"terminal_id": cell_id, "cwd": terminal_cwd}} if terminal_cwd is not None else None
    )
    return tool_call_update(
        tool_call_fields(
            cell_id,
            title,
            kind="execute",
            status="pending",
            content=content,
            raw_input={"code": code},
            meta=meta,
        )
    )


def cell_running_update(cell_id: str) -> Frame:
    """`tool_call_update`: the cell really started in the kernel."""
    return {"sessionUpdate": "tool_call_update", "toolCallId": cell_id, "status": "in_progress"}


def cell_progress_update(
    cell_id: str,
    content: Sequence[Mapping[str, object]],
    *,
    status: str | None = None,
    locations: Sequence[Mapping[str, object]] = (),
    terminal_data: str | None = None,
) -> Frame:
    """`tool_call_update` re-sending the whole card (content replaces the previous array).

    `terminal_data`: new terminal output, as `_meta.terminal_output`.
    """
    update: Frame = {"sessionUpdate": "tool_call_update", "toolCallId": cell_id}
    if status is not None:
        update["status"] = status
    update["content"] = [dict(c) for c in content]
    if locations:
        update["locations"] = [dict(loc) for loc in locations]
    if terminal_data:
        update["_meta"] = {"terminal_output": {"terminal_id": cell_id, "data": terminal_data}}
    return update


def cell_finished_update(
    cell_id: str,
    content: Sequence[Mapping[str, object]],
    *,
    outcome: str,
    error: str | None = None,
    locations: Sequence[Mapping[str, object]] = (),
    terminal: bool = False,
    terminal_data: str | None = None,
) -> Frame:
    """The last `tool_call_update` of a cell: `completed` or `failed`, `rawOutput {status, error?}`.

    `outcome` is agent_core's status (completed, failed, cancelled); with a terminal the update
    also carries `_meta.terminal_exit` (exit code 0/1, `SIGINT` for a cancelled cell).
    """
    status = "completed" if outcome == "completed" else "failed"
    update: Frame = {"sessionUpdate": "tool_call_update", "toolCallId": cell_id, "status": status}
    update["content"] = [dict(c) for c in content]
    if locations:
        update["locations"] = [dict(loc) for loc in locations]
    update["rawOutput"] = {"status": outcome, **({"error": error} if error else {})}
    if terminal:
        meta: Frame = {}
        if terminal_data:
            meta["terminal_output"] = {"terminal_id": cell_id, "data": terminal_data}
        meta["terminal_exit"] = {
            "terminal_id": cell_id,
            "exit_code": 0 if outcome == "completed" else 1,
            "signal": "SIGINT" if outcome == "cancelled" else None,
        }
        update["_meta"] = meta
    return update


# ---------------------------------------------------------------- autonomous-mode gates


def gate_started_update(
    gate_id: str, title: str, content: Sequence[Mapping[str, object]], command: str
) -> Frame:
    """`tool_call` opening a gate's card: an execute card that is already running."""
    return tool_call_update(
        tool_call_fields(
            gate_id,
            title,
            kind="execute",
            status="in_progress",
            content=content,
            raw_input={"command": command},
        )
    )


def gate_progress_update(gate_id: str, content: Sequence[Mapping[str, object]]) -> Frame:
    """`tool_call_update`: the gate's card with its output so far."""
    return {"sessionUpdate": "tool_call_update", "toolCallId": gate_id, "content": [dict(c) for c in content]}


def gate_finished_update(
    gate_id: str,
    content: Sequence[Mapping[str, object]],
    *,
    passed: bool,
    exit_code: int | None,
    summary: str,
    not_rerun: bool,
) -> Frame:
    """The gate's verdict: `completed` when it exited 0, else `failed`; `rawOutput` says why."""
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": gate_id,
        "status": "completed" if passed else "failed",
        "content": [dict(c) for c in content],
        "rawOutput": {"exitCode": exit_code, "summary": summary, "notRerun": not_rerun},
    }


def gates_confirm_tool_call(request_id: str, title: str, commands: Sequence[str]) -> Frame:
    """The card (and permission `toolCall`) asking to confirm detected gate commands."""
    return tool_call_fields(
        request_id,
        title,
        kind="execute",
        status="pending",
        content=[tool_text("```sh\n" + "\n".join(commands) + "\n```")],
        raw_input={"commands": list(commands)},
    )


def gates_confirm_settled_update(request_id: str, *, confirmed: bool) -> Frame:
    """Closes the confirmation card: nothing runs from it; the answer is its outcome."""
    text = "Confirmed: autonomous mode uses these gates." if confirmed else "Not confirmed."
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": request_id,
        "status": "completed" if confirmed else "failed",
        "content": [tool_text(text)],
    }


def goal_info_update(goal: Mapping[str, object] | None) -> Frame:
    """`session_info_update` carrying the session's goal in `_meta` (None once cleared)."""
    return {
        "sessionUpdate": "session_info_update",
        "_meta": {META_KEY: {"goal": dict(goal) if goal else None}},
    }


def edit_card_update(tool_call_id: str, title: str, path: str, old_text: str | None, new_text: str) -> Frame:
    """`tool_call` for a file edit outside any cell: a completed `edit` card with its diff."""
    return tool_call_update(
        tool_call_fields(
            tool_call_id,
            title,
            kind="edit",
            status="completed",
            content=[tool_diff(path, old_text, new_text)],
            locations=[location(path)],
        )
    )


# ---------------------------------------------------------------- refinement cards and review


def refinement_card_update(
    refinement_id: str,
    summary: str,
    scope: str,
    *,
    applied: bool,
    content: Sequence[Mapping[str, object]],
    title: str | None = None,
) -> Frame:
    """`tool_call`: a refinement result as a completed (applied) or failed `edit` card
    (`title` overrides "Refine harness: <summary>", see client_quirks.py)."""
    return tool_call_update(
        tool_call_fields(
            f"refinement-{refinement_id}",
            title or f"Refine harness: {summary}",
            kind="edit",
            status="completed" if applied else "failed",
            content=content,
            raw_output={"refinementId": refinement_id, "scope": scope, "applied": applied},
        )
    )


def refinement_message_update(
    refinement_id: str, summary: str, scope: str, *, applied: bool, failure: str | None = None
) -> Frame:
    """`agent_message_chunk` after a refinement card: what happened and how to undo it.

    `failure`: the job failed before anything could be applied; the message says why, once.
    """
    if failure is not None:
        reason = failure.rstrip()
        stop = "" if reason.endswith((".", "!", "?")) else "."
        text = f"\n\nHarness refinement `{refinement_id}` ({scope}) failed: {reason}{stop}\n"
        return agent_message_update(text, f"refinement-{refinement_id}")
    verb = "applied" if applied else "was refused"
    undo = f" Undo it with `/rollback {refinement_id}`." if applied else ""
    # A blank line on both sides: whatever follows (a command's reply) is its own paragraph.
    text = f"\n\nHarness refinement `{refinement_id}` ({scope}) {verb}: {summary}.{undo}\n\n"
    return agent_message_update(text, f"refinement-{refinement_id}")


def review_card(
    proposal_id: str,
    summary: str | None,
    content: Sequence[Mapping[str, object]],
    raw_input: Mapping[str, object],
    *,
    status: str = "pending",
    title: str | None = None,
) -> Frame:
    """A proposal waiting for review as a tool call (`edit`, one diff per edit): the `toolCall` of
    its permission request, and (through `tool_call_update`) the pending card shown after a turn
    (`title` overrides "Refine harness: <summary>", see client_quirks.py)."""
    return tool_call_fields(
        f"review-{proposal_id}",
        title or f"Refine harness: {summary or 'proposed edits'}",
        kind="edit",
        status=status,
        content=content,
        raw_input=raw_input,
    )


def elicitation_form_request(
    session_id: str, message: str, schema: Mapping[str, object], *, tool_call_id: str | None = None
) -> Frame:
    """`elicitation/create` params for a form in a session (tied to a card when `tool_call_id`)."""
    frame: Frame = {"sessionId": session_id}
    if tool_call_id is not None:
        frame["toolCallId"] = tool_call_id
    frame.update({"mode": "form", "message": message, "requestedSchema": dict(schema)})
    return frame


def confirm_card(
    card_id: str, title: str, content: Sequence[Mapping[str, object]], *, kind: str = "other"
) -> Frame:
    """A question the server asks before it acts (a rewind's file revert, its refinements): the
    `toolCall` of its permission request, showing what would change."""
    return tool_call_fields(card_id, title, kind=kind, status="pending", content=content)


def review_settled_update(proposal_id: str, *, applied: bool) -> Frame:
    """`tool_call_update` closing a review card once its proposal is decided."""
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": f"review-{proposal_id}",
        "status": "completed" if applied else "failed",
    }


def review_waiting_update(proposal_id: str) -> Frame:
    """`agent_message_chunk` under a pending review card shown after its turn ended."""
    return agent_message_update(
        f"\n\nHarness refinement proposal `{proposal_id}` is waiting for your "
        "review: run `/review`, or it is asked at the start of your next prompt.\n"
    )


def permission_options(options: Iterable[tuple[str, str, str]]) -> list[Frame]:
    """`(optionId, name, kind)` triples as permission options."""
    return [{"optionId": option_id, "name": name, "kind": kind} for option_id, name, kind in options]


def permission_request(
    session_id: str,
    tool_call: Mapping[str, object],
    options: Sequence[Mapping[str, object]],
    meta: Mapping[str, object] | None = None,
) -> Frame:
    """The params of `session/request_permission` (`meta`: its `_meta`, e.g. the asking subagent)."""
    params: Frame = {
        "sessionId": session_id,
        "toolCall": dict(tool_call),
        "options": [dict(o) for o in options],
    }
    if meta:
        params["_meta"] = dict(meta)
    return params


def cancel_request_notification(request_id: object) -> Frame:
    """The params of `$/cancel_request`: we no longer wait for the answer to our request `request_id`."""
    return {"requestId": request_id}


# ---------------------------------------------------------------- quiescence


def quiescence_state(quiescent: bool, pending: int, last_refinement_id: str | None) -> Frame:
    """`{quiescent, pending, lastRefinementId?}`: the state both quiescence frames carry."""
    state: Frame = {"quiescent": quiescent, "pending": pending}
    if last_refinement_id:
        state["lastRefinementId"] = last_refinement_id
    return state


def quiescence_notification(
    session_id: str, quiescent: bool, pending: int, last_refinement_id: str | None
) -> Frame:
    """The params of the `_harness/quiescence` notification."""
    return {"sessionId": session_id, **quiescence_state(quiescent, pending, last_refinement_id)}


def quiescence_mirror_update(
    quiescent: bool,
    pending: int,
    last_refinement_id: str | None,
    background: Sequence[Mapping[str, object]] = (),
) -> Frame:
    """`session_info_update` mirroring quiescence in `_meta["continual-acp"].quiescence`.

    The one mirror of everything the user waits on, in the shape of ACP v2's idle state: `background`
    lists the work still running (each a `background_session` entry; empty once settled), and
    `quiescent` is true only when refinement has settled and that list is empty.
    """
    state = quiescence_state(quiescent and not background, pending, last_refinement_id)
    state["background"] = [dict(entry) for entry in background]
    return {"sessionUpdate": "session_info_update", "_meta": {META_KEY: {"quiescence": state}}}


def background_item(kind: str, item_id: str, title: str) -> Frame:
    """One entry of the quiescence mirror's `background` list that is not a session: what runs
    (`type`, e.g. "refinement"), its id, a line for the user."""
    return {"type": kind, "id": item_id, "title": title}


# ---------------------------------------------------------------- notices and compaction (ACP v1)


def notice_update(severity: str, title: str, description: str | None = None) -> Frame:
    """`notice` (only to clients that advertise `session.notices`): plain text, title stands alone."""
    update: Frame = {"sessionUpdate": "notice", "severity": severity, "title": title}
    if description:
        update["description"] = description
    return update


def compaction_update(compaction_id: str, status: str, error: str | None = None) -> Frame:
    """`compaction_update` (only with `session.compaction`): the compaction's lifecycle status."""
    update: Frame = {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": status}
    if error:
        update["error"] = error
    return update


def compaction_summary_chunk_update(compaction_id: str, text: str) -> Frame:
    """`compaction_summary_chunk`: the summary the context restarts from, as one text block."""
    return {
        "sessionUpdate": "compaction_summary_chunk",
        "compactionId": compaction_id,
        "content": text_block(text),
    }


# ---------------------------------------------------------------- messages, plan, usage, info


def agent_message_update(text: str, message_id: str | None = None) -> Frame:
    """`agent_message_chunk` with text (and its message id, when it has one)."""
    update: Frame = {"sessionUpdate": "agent_message_chunk", "content": text_block(text)}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def agent_thought_update(text: str, message_id: str) -> Frame:
    """`agent_thought_chunk` with text."""
    return {"sessionUpdate": "agent_thought_chunk", "content": text_block(text), "messageId": message_id}


def user_message_update(block: Mapping[str, object], message_id: str) -> Frame:
    """`user_message_chunk` replaying one prompt block."""
    return {"sessionUpdate": "user_message_chunk", "content": dict(block), "messageId": message_id}


def plan_update(entries: Iterable[PlanItem]) -> Frame:
    """`plan`: the whole plan (each update replaces the previous one)."""
    return {
        "sessionUpdate": "plan",
        "entries": [{"content": e.content, "priority": e.priority, "status": e.status} for e in entries],
    }


# The one plan a session has (its goal and gates), as `plan_update` names it.
SESSION_PLAN_ID = "session"


def plan_update_by_id(plan_id: str, entries: Iterable[PlanItem]) -> Frame:
    """`plan_update` (unstable v1, for clients that advertise `plan`): the whole plan `plan_id`."""
    return {
        "sessionUpdate": "plan_update",
        "plan": {
            "type": "items",
            "planId": plan_id,
            "entries": [{"content": e.content, "priority": e.priority, "status": e.status} for e in entries],
        },
    }


# A child's state as the unstable `StateUpdate` names it. States it has no word for go as
# implementation-specific values (a leading `_`), which the schema reserves for that.
_SUBAGENT_STATES = {
    "running": "running",
    "needs-action": "requires_action",
    "idle": "idle",
    "finished": "idle",
}


def subagent_update(child_session_id: str, name: str, task: str, state: str, parent_session_id: str) -> Frame:
    """`subagent_update` (unstable v1, for clients that advertise `subagents`): the child `name`
    announced on (or updated in) the parent's thread, with its state as a whole snapshot."""
    return {
        "sessionUpdate": "subagent_update",
        "sessionId": child_session_id,
        "title": name,
        "description": task,
        "state": {"state": _SUBAGENT_STATES.get(state, f"_{state}")},
        # No client-initiated mutation of a child is served (cancel goes through `/agents cancel`).
        "capabilities": {},
        "_meta": subagent_meta(child_session_id, name, state, parent_session_id),
    }


def usage_update(used: int, size: int) -> Frame:
    """`usage_update`: context tokens used of the window's size."""
    return {"sessionUpdate": "usage_update", "used": used, "size": size}


def session_title_update(title: str) -> Frame:
    """`session_info_update` carrying the session's title."""
    return {"sessionUpdate": "session_info_update", "title": title}


def available_commands_update(commands: Iterable[Command]) -> Frame:
    """`available_commands_update`: every slash command, with its input hint when it takes one."""
    listed: list[Frame] = []
    for command in commands:
        entry: Frame = {"name": command.name, "description": command.description}
        if command.hint:
            entry["input"] = {"hint": command.hint}
        listed.append(entry)
    return {"sessionUpdate": "available_commands_update", "availableCommands": listed}


def current_mode_update(mode_id: str) -> Frame:
    """`current_mode_update`."""
    return {"sessionUpdate": "current_mode_update", "currentModeId": mode_id}


def config_option_update(options: Sequence[Mapping[str, object]]) -> Frame:
    """`config_option_update`: the complete list of config options."""
    return {"sessionUpdate": "config_option_update", "configOptions": [dict(o) for o in options]}


# ---------------------------------------------------------------- modes and config options


def session_modes(current: str, modes: Iterable[tuple[str, str, str]]) -> Frame:
    """`modes`: the current mode and `(id, name, description)` of each available one."""
    return {
        "currentModeId": current,
        "availableModes": [{"id": mode, "name": name, "description": text} for mode, name, text in modes],
    }


def select_config_option(
    option_id: str,
    name: str,
    *,
    description: str,
    category: str,
    current: str,
    choices: Iterable[tuple[str, str, str]],
) -> Frame:
    """A `select` config option; `choices` are `(value, name, description)`, description optional."""
    return {
        "id": option_id,
        "name": name,
        "description": description,
        "category": category,
        "type": "select",
        "currentValue": current,
        "options": [
            {"value": value, "name": label, **({"description": text} if text else {})}
            for value, label, text in choices
        ],
    }


# ---------------------------------------------------------------- responses


def initialize_response(
    *,
    protocol_version: int,
    name: str,
    title: str,
    version: str,
    extension_version: int,
    extension_methods: Sequence[str],
    extension_notifications: Sequence[str],
    auth_methods: Sequence[Frame] = (),
) -> Frame:
    """The `initialize` result: only what works is advertised; our extension under `_meta`."""
    return {
        "protocolVersion": protocol_version,
        "agentInfo": {"name": name, "title": title, "version": version},
        "authMethods": list(auth_methods),
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            # stdio always; both HTTP transports through the MCP SDK (agent_core/mcp), tested.
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {
                "list": {},
                "resume": {},
                "close": {},
                "delete": {},
                # Unstable v1 (session_methods.py). A client that does not know them ignores them.
                "fork": {},
                "status": {},
                "title": {},
                # The editor's own instructions on new/load/resume/fork (system_prompt_param.py).
                "systemPrompt": {"mode": {"override": {}}},
            },
            "_meta": {
                META_KEY: {
                    "version": extension_version,
                    "methods": list(extension_methods),
                    "notifications": list(extension_notifications),
                }
            },
        },
    }


def terminal_auth_method(method_id: str, name: str, description: str, args: Sequence[str]) -> Frame:
    """An `authMethods` entry of type `terminal`: the client runs the agent's own launch line plus
    `args` in a terminal and waits for exit 0 (only for a client with `auth.terminal: true`)."""
    return {"id": method_id, "name": name, "description": description, "type": "terminal", "args": list(args)}


def agent_auth_method(
    method_id: str, name: str, description: str, terminal_command: Sequence[str] | None = None
) -> Frame:
    """An `authMethods` entry the client completes with `authenticate {methodId}`; with
    `terminal_command`, also the `_meta["terminal-auth"]` launch line clients that predate the
    `terminal` type run in a terminal (`{command, args, label}`)."""
    method: Frame = {"id": method_id, "name": name, "description": description}
    if terminal_command:
        command, *args = terminal_command
        method["_meta"] = {"terminal-auth": {"command": command, "args": args, "label": name}}
    return method


def kernel_guarantees(
    backend: str,
    where: str,
    *,
    confined: bool,
    tier: str | None,
    network: bool,
    approval_required: bool,
    notes: Sequence[str] = (),
) -> Frame:
    """What the session's kernel backend guarantees, for `_meta["continual-acp"].kernel`."""
    return {
        "backend": backend,
        "where": where,
        "confined": confined,
        "tier": tier,
        "network": network,
        "approvalRequired": approval_required,
        "notes": list(notes),
    }


def session_setup_response(
    modes: Mapping[str, object],
    config_options: Sequence[Mapping[str, object]],
    kernel: Mapping[str, object] | None = None,
) -> Frame:
    """`{modes, configOptions}`: the session/load and session/resume result; with `kernel` (a
    `kernel_guarantees` record) also `_meta["continual-acp"].kernel`, for an editor to show."""
    answer: Frame = {"modes": dict(modes), "configOptions": [dict(o) for o in config_options]}
    if kernel is not None:
        answer["_meta"] = {META_KEY: {"kernel": dict(kernel)}}
    return answer


def new_session_response(
    session_id: str,
    modes: Mapping[str, object],
    config_options: Sequence[Mapping[str, object]],
    kernel: Mapping[str, object] | None = None,
) -> Frame:
    """The session/new result: the id, then the session setup."""
    return {"sessionId": session_id, **session_setup_response(modes, config_options, kernel)}


def session_status_response(status: str) -> Frame:
    """The session/status result: `open` (in memory here) or `saved` (on disk, loadable)."""
    return {"status": status}


def rewind_response(
    rewound: bool,
    turn: int,
    prompts: int,
    cut_transcript: str,
    kernel: Mapping[str, object],
    kernel_note: str,
    files: str,
    refinements_after: Sequence[str],
    rolled_back: Sequence[str],
) -> Frame:
    """`_session/rewind` answered in this server's shape (`turns` or `messageId`): what it did."""
    return {
        "rewound": rewound,
        "turn": turn,
        "prompts": prompts,
        "cutTranscript": cut_transcript,
        "kernel": dict(kernel),
        "kernelNote": kernel_note,
        "files": files,
        "refinementsAfter": list(refinements_after),
        "rolledBack": list(rolled_back),
    }


def anchored_rewind_response(rewound: bool) -> Frame:
    """`_session/rewind` answered in the anchored shape (`beforeMessage`) other ACP agents speak:
    only whether it rewound (a running prompt answers False)."""
    return {"rewound": rewound}


def fork_session_response(
    session_id: str,
    modes: Mapping[str, object],
    config_options: Sequence[Mapping[str, object]],
    *,
    forked_from: str,
    before_prompt: int | None,
    kernel_note: str,
) -> Frame:
    """The session/fork result: the new id and its setup; under `_meta` where it came from and which
    kernel state it got."""
    return {
        "sessionId": session_id,
        "modes": dict(modes),
        "configOptions": [dict(o) for o in config_options],
        "_meta": {
            META_KEY: {"forkedFrom": forked_from, "beforePrompt": before_prompt, "kernel": kernel_note}
        },
    }


def session_list_entry(
    session_id: str, cwd: str, title: str | None = None, updated_at: str | None = None
) -> Frame:
    """One session in a session/list result."""
    info: Frame = {"sessionId": session_id, "cwd": cwd}
    if title:
        info["title"] = title
    if updated_at:
        info["updatedAt"] = updated_at
    return info


def list_sessions_response(sessions: Sequence[Mapping[str, object]], next_cursor: str | None = None) -> Frame:
    """The session/list result (`nextCursor` only when there is a next page)."""
    answer: Frame = {"sessions": [dict(s) for s in sessions]}
    if next_cursor:
        answer["nextCursor"] = next_cursor
    return answer


def config_options_response(config_options: Sequence[Mapping[str, object]]) -> Frame:
    """The session/set_config_option result: the complete list after the change."""
    return {"configOptions": [dict(o) for o in config_options]}


def prompt_response(stop_reason: str, usage: Frame | None = None) -> Frame:
    """The session/prompt result; `usage` (unstable v1, `turn_usage`) only for a client that takes it."""
    if usage is None:
        return {"stopReason": stop_reason}
    return {"stopReason": stop_reason, "usage": usage}


def turn_usage(
    input_tokens: int, output_tokens: int, cache_read_tokens: int, cache_write_tokens: int
) -> Frame:
    """A prompt turn's tokens (unstable v1 `Usage`). `inputTokens` counts the prompt tokens not read
    from cache; the total is what the endpoint billed as prompt + completion (cache writes are part
    of the prompt tokens, so they are not added twice)."""
    return {
        "totalTokens": input_tokens + cache_read_tokens + output_tokens,
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "cachedReadTokens": cache_read_tokens,
        "cachedWriteTokens": cache_write_tokens,
    }


def empty_response() -> Frame:
    """`{}`: the result of a method that answers nothing (close, delete, set_mode)."""
    return {}


# ---------------------------------------------------------------- `_harness/*` answers


def harness_status_response(
    quiescent: bool, pending: int, in_flight: int, awaiting_review: int, last_refinement_id: str | None
) -> Frame:
    """The `_harness/status` result."""
    answer: Frame = {
        "quiescent": quiescent,
        "pending": pending,
        "inFlight": in_flight,
        "awaitingReview": awaiting_review,
    }
    if last_refinement_id:
        answer["lastRefinementId"] = last_refinement_id
    return answer


def await_quiescence_response(quiescent: bool, last_refinement_id: str | None) -> Frame:
    """The `_harness/await_quiescence` result."""
    answer: Frame = {"quiescent": quiescent}
    if last_refinement_id:
        answer["lastRefinementId"] = last_refinement_id
    return answer


def harness_state_response(
    entries: Sequence[Mapping[str, object]],
    tombstones: Sequence[Mapping[str, object]],
    next_cursor: str | None = None,
    total: int | None = None,
) -> Frame:
    """The `_harness/state` result: one page of entries (each with its `key`) and the tombstones,
    wire-cased; `nextCursor` only when more entries follow, `total` the entries of every page."""
    answer: Frame = {"entries": [dict(e) for e in entries], "tombstones": [dict(t) for t in tombstones]}
    if total is not None:
        answer["total"] = total
    if next_cursor:
        answer["nextCursor"] = next_cursor
    return answer


def harness_history_response(
    refinements: Sequence[Mapping[str, object]], next_cursor: str | None = None
) -> Frame:
    """The `_harness/history` result: one page of refinement summaries, newest first."""
    answer: Frame = {"refinements": [dict(r) for r in refinements]}
    if next_cursor:
        answer["nextCursor"] = next_cursor
    return answer


# ---------------------------------------------------------------- client file system


def read_text_file_request(session_id: str, path: str) -> Frame:
    """The params of `fs/read_text_file`."""
    return {"sessionId": session_id, "path": path}


def write_text_file_request(session_id: str, path: str, content: str) -> Frame:
    """The params of `fs/write_text_file`."""
    return {"sessionId": session_id, "path": path, "content": content}


# ---------------------------------------------------------------- subagents

# A child's state -> the status of its card in the parent's thread.
SUBAGENT_CARD_STATUS = {
    "queued": "pending",
    "running": "in_progress",
    "needs-action": "in_progress",  # still running; the card says it waits for the user
    "idle": "completed",
    "finished": "completed",
    "failed": "failed",
    "cancelled": "failed",
    "interrupted": "failed",
}


def subagent_info(session_id: str, name: str, state: str, parent_session_id: str) -> Frame:
    """A child session in the shape of ACP's subagent proposal: `{sessionId, name, state, parentSessionId}`."""
    return {"sessionId": session_id, "name": name, "state": state, "parentSessionId": parent_session_id}


def subagent_meta(session_id: str, name: str, state: str, parent_session_id: str) -> Frame:
    """`_meta` of a subagent card: `{"continual-acp": {"subagent": subagent_info(...)}}`."""
    return {META_KEY: {"subagent": subagent_info(session_id, name, state, parent_session_id)}}


def subagent_card_update(session_id: str, name: str, task: str, state: str, parent_session_id: str) -> Frame:
    """`tool_call` opening the card of a spawned child in its parent's thread (kind `other`)."""
    first_line = " ".join((task.strip().splitlines() or [""])[0].split())
    summary = first_line if len(first_line) <= 60 else first_line[:59] + "…"
    return tool_call_update(
        tool_call_fields(
            f"subagent-{session_id}",
            f"Subagent {name}: {summary}" if summary else f"Subagent {name}",
            kind="other",
            status=SUBAGENT_CARD_STATUS.get(state, "pending"),
            content=[tool_text(task)],
            raw_input={"name": name, "task": task, "sessionId": session_id},
            meta=subagent_meta(session_id, name, state, parent_session_id),
        )
    )


def subagent_progress_update(
    session_id: str,
    name: str,
    state: str,
    parent_session_id: str,
    content: Sequence[Mapping[str, object]],
) -> Frame:
    """`tool_call_update` following a child's state; content replaces the card's (task, then answer)."""
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": f"subagent-{session_id}",
        "status": SUBAGENT_CARD_STATUS.get(state, "pending"),
        "content": [dict(c) for c in content],
        "_meta": subagent_meta(session_id, name, state, parent_session_id),
    }


def subagent_link_meta(parent_session_id: str, name: str, state: str) -> Frame:
    """`_meta` of a child session in `session/list`: its parent, name and state."""
    return {META_KEY: {"parentSessionId": parent_session_id, "subagent": {"name": name, "state": state}}}


def background_session(session_id: str, name: str, state: str, parent_session_id: str) -> Frame:
    """One entry of the quiescence mirror's `background` list: a child session still queued or
    running (`{type: "session", sessionId, name, state, parentSessionId}`)."""
    return {"type": "session", **subagent_info(session_id, name, state, parent_session_id)}
