"""v1 frames in their v2 draft shapes. Pure functions of one frame; the per-session state (ids for
messages v1 sent without one) is `dialect.py`'s.

What changes: a `tool_call` is a `tool_call_update` (v2 has one upsert), a diff is `changes` plus a
git patch, config options are keyed `configId`, commands and their input carry `type`, the plan is
`plan_update` with `planId: "session"`, a permission request names its `subject`, an auth method
is keyed `methodId` and always has a `type`. `current_mode_update` has no v2 counterpart (the `mode` config option, which
follows every mode change, carries it). Everything else is already a valid v2 update.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

Frame = dict[str, object]

PLAN_ID = "session"  # the one plan a session has (as v1's unstable `plan_update`)
DROPPED = frozenset({"current_mode_update"})


def session_update(update: Mapping[str, Any]) -> Frame | None:
    """One v1 `session/update` payload as v2 (None: it has no v2 counterpart)."""
    kind = update.get("sessionUpdate")
    if kind in DROPPED:
        return None
    if kind in ("tool_call", "tool_call_update"):
        return tool_call(update, session_update="tool_call_update")
    if kind == "available_commands_update":
        return {**update, "availableCommands": [command(c) for c in update.get("availableCommands") or []]}
    if kind == "config_option_update":
        return {**update, "configOptions": [config_option(o) for o in update.get("configOptions") or []]}
    if kind == "plan":
        rest = {k: v for k, v in update.items() if k not in ("sessionUpdate", "entries")}
        return {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": PLAN_ID, "entries": list(update.get("entries") or [])},
            **rest,
        }
    return dict(update)


def tool_call(call: Mapping[str, Any], *, session_update: str | None = None) -> Frame:
    """A v1 tool call (start or update) as a v2 `ToolCallUpdate`: its diffs reshaped."""
    out: Frame = {}
    if session_update is not None:
        out["sessionUpdate"] = session_update
    out.update({k: v for k, v in call.items() if k != "sessionUpdate"})
    content = call.get("content")
    if isinstance(content, list):
        out["content"] = [
            diff(c) if isinstance(c, Mapping) and c.get("type") == "diff" else c for c in content
        ]
    return out


def diff(block: Mapping[str, Any]) -> Frame:
    """v1's `{type: diff, path, oldText, newText}` as v2's `changes` + a git patch of the same edit."""
    path = str(block.get("path"))
    old, new = block.get("oldText"), str(block.get("newText") or "")
    added = old is None
    lines = difflib.unified_diff(
        [] if added else str(old).splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if added else path,
        tofile=path,
    )
    body = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    header = f"diff --git {path} {path}\n" + ("new file mode 100644\n" if added else "")
    out: Frame = {
        "type": "diff",
        "changes": [{"operation": "add" if added else "modify", "path": path, "fileType": "text"}],
        "patch": {"format": "git_patch", "text": header + body},
    }
    if "_meta" in block:
        out["_meta"] = block["_meta"]
    return out


def command(entry: Mapping[str, Any]) -> Frame:
    out: Frame = {"type": "command", **entry}
    hint = entry.get("input")
    if isinstance(hint, Mapping) and "type" not in hint:
        out["input"] = {"type": "text", **hint}
    return out


def config_option(option: Mapping[str, Any]) -> Frame:
    return {("configId" if k == "id" else k): v for k, v in option.items()}


def permission_request(params: Mapping[str, Any]) -> Frame:
    """v1 `session/request_permission` params (`toolCall`, `options`) as v2's (`title`, `subject`)."""
    call = params.get("toolCall")
    call = call if isinstance(call, Mapping) else {}
    out: Frame = {
        "sessionId": params.get("sessionId"),
        "title": str(call.get("title") or "Permission"),
        "subject": {"type": "tool_call", "toolCall": tool_call(call)},
        "options": list(params.get("options") or []),
    }
    if "_meta" in params:
        out["_meta"] = params["_meta"]
    return out


def auth_method(method: Mapping[str, Any]) -> Frame:
    """v1's method (`id`, an `agent` one untyped) as v2's (`methodId`, always typed)."""
    out: Frame = {"type": method.get("type", "agent")}
    out.update({("methodId" if k == "id" else k): v for k, v in method.items() if k != "type"})
    return out


def session_result(result: Mapping[str, Any]) -> Frame:
    """session/new, session/resume and session/set_config_option results: v2 has no modes (the
    `mode` config option stays), and config options are keyed `configId`."""
    out = {k: v for k, v in result.items() if k != "modes"}
    if isinstance(out.get("configOptions"), list):
        out["configOptions"] = [config_option(o) for o in out["configOptions"]]
    return out
