"""The one set of ACP test steps (initialize, new session, prompt, slash command), used by every stdio test.

Kept out of conftest.py so the module name is unique; tests/conftest.py puts this directory on
sys.path so tests in other directories import the same helpers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from acp_client import AcpClient, Frame, RpcError

ClientFactory = Callable[..., AcpClient]


def initialize(client: AcpClient, **capabilities: object) -> dict[str, object]:
    result = client.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": dict(capabilities),
            "clientInfo": {"name": "pytest", "version": "1"},
        },
    )
    assert isinstance(result, dict)
    return result


def new_session(client: AcpClient, cwd: str | Path) -> tuple[str, dict[str, Any]]:
    """Open a session in `cwd`; its id and the whole `session/new` result."""
    result = client.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return result["sessionId"], result


class Answered(NamedTuple):
    """How a prompt ended: its stop reason and the sequence number of the response frame."""

    stop_reason: str
    seq: int


def send_prompt(client: AcpClient, session_id: str, words: str) -> int:
    """Start a `session/prompt` with one text block; returns the request id (nothing is awaited)."""
    return client.start_request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": words}]}
    )


def prompt(client: AcpClient, session_id: str, words: str, timeout: float = 60.0) -> Answered:
    """Run a prompt to its answer; an error answer raises RpcError."""
    frame = client.response_frame(send_prompt(client, session_id, words), timeout)
    if "error" in frame.message:
        raise RpcError(frame.message["error"])
    return Answered(frame.message["result"]["stopReason"], frame.seq)


def cell_updates(client: AcpClient, session_id: str, cell_id: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(session_id) if u.get("toolCallId") == cell_id]


def final_card(client: AcpClient, session_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The last cell's `tool_call` start and all its updates."""
    starts = [u for u in client.updates(session_id) if u["sessionUpdate"] == "tool_call"]
    assert starts, "no tool card was sent"
    start = starts[-1]
    return start, cell_updates(client, session_id, start["toolCallId"])


def texts(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(b["content"].get("text", "") for b in blocks if b.get("type") == "content")


# How the command runner reports an exception it caught: the reply a test must never accept.
COMMAND_CRASHED = re.compile(r"^/[\w:-]+ failed: \w+", re.MULTILINE)


def command_reply(
    client: AcpClient, session_id: str, line: str, timeout: float = 60.0, *, commands_only: bool = False
) -> tuple[str, Frame]:
    """Send one prompt line (a slash command): the reply text sent before the answer, and the answer.

    `commands_only` keeps just the command runner's messages (ids `cmd-...`): needed when a turn
    runs meanwhile and its model text arrives in between.

    The command runner turns any exception into a `/name failed: ...` reply instead of an error
    answer, so a crash would otherwise pass every `in reply` check that the crash text happens to
    contain; here it fails the test at once.
    """
    seen = len(client.frames)
    response = client.response_frame(send_prompt(client, session_id, line), timeout)
    assert response.message.get("result", {}).get("stopReason") == "end_turn", response.message
    reply = "".join(
        f.message["params"]["update"]["content"]["text"]
        for f in client.frames[seen:]
        if f.seq < response.seq
        and f.message.get("method") == "session/update"
        and f.message["params"].get("sessionId") == session_id
        and f.message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        and (not commands_only or str(f.message["params"]["update"].get("messageId", "")).startswith("cmd-"))
    )
    assert not COMMAND_CRASHED.search(reply), f"{line!r} crashed: {reply}"
    return reply, response


def run_command(client: AcpClient, session_id: str, line: str, timeout: float = 60.0) -> str:
    """The reply text of one prompt line (see `command_reply`)."""
    return command_reply(client, session_id, line, timeout)[0]
