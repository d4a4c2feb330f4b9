"""Builders for the v2 draft's frames that have no v1 counterpart: pure dicts, pinned by
`tests/golden/v2/` and validated there against the v2 draft schema the npm SDK ships."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Frame = dict[str, object]

PROTOCOL_VERSION = 2


def initialize_response(
    *,
    info: Mapping[str, object],
    auth_methods: Sequence[Frame],
    extension_meta: Mapping[str, object],
    image: bool,
    embedded_context: bool,
) -> Frame:
    """The v2 `initialize` result: `info` and `capabilities.session` (prompt content, MCP transports,
    delete) in the v2 places; our extension surface under `_meta` as in v1."""
    prompt: Frame = {}
    if image:
        prompt["image"] = {}
    if embedded_context:
        prompt["embeddedContext"] = {}
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "info": dict(info),
        "capabilities": {
            # `steering`: a session/prompt sent mid-turn joins the running turn (lifecycle.py).
            "session": {"prompt": prompt, "mcp": {"stdio": {}, "http": {}}, "delete": {}, "steering": {}},
            "_meta": dict(extension_meta),
        },
        "authMethods": list(auth_methods),
    }


def prompt_accepted(message_id: str) -> Frame:
    """The `session/prompt` result: the prompt is in the conversation as user message `message_id`
    (processing is reported by `state_update`s, not by this answer)."""
    return {"messageId": message_id}


def user_message(message_id: str, content: Sequence[Mapping[str, object]]) -> Frame:
    """The echo of an accepted prompt, under the id its acknowledgment named."""
    return {"sessionUpdate": "user_message", "messageId": message_id, "content": [dict(c) for c in content]}


def state_update(
    state: str,
    background: Sequence[Frame],
    *,
    stop_reason: str | None = None,
    error: Mapping[str, object] | None = None,
) -> Frame:
    """A `state_update` snapshot: `running`, `requires_action` or `idle` (with the stop reason that
    ended the foreground work, and the JSON-RPC error when that reason is `error`). `background` is
    always reported, `[]` when nothing runs."""
    update: Frame = {"sessionUpdate": "state_update", "state": state, "background": list(background)}
    if stop_reason is not None:
        update["stopReason"] = stop_reason
        if stop_reason == "error" and error is not None:
            update["error"] = dict(error)
    return update


def background_work(item: Mapping[str, object]) -> Frame:
    """One item of v1's quiescence mirror (`background.py`) as v2 background work. The draft lists
    terminals and tool calls; ours are neither, so they go as implementation types (`_refinement`:
    harness refinement queued or running; `_subagent`: a child session), their fields kept."""
    kind = item.get("type")
    rest = {k: v for k, v in item.items() if k != "type"}
    if kind == "session":
        return {"type": "_subagent", **rest}
    return {"type": f"_{kind}" if isinstance(kind, str) and not kind.startswith("_") else str(kind), **rest}
