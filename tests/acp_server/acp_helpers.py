"""Shared steps for the acp_server tests (kept out of conftest.py so the module name is unique)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_client import AcpClient, RpcError

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


def new_session(client: AcpClient, cwd: str) -> tuple[str, dict[str, Any]]:
    rid = client.start_request("session/new", {"cwd": cwd, "mcpServers": []})
    result = client.result(rid)
    return result["sessionId"], result


def prompt(client: AcpClient, session_id: str, words: str, timeout: float = 60.0) -> tuple[str, int]:
    """Run a prompt; returns (stopReason, sequence number of the response frame)."""
    rid = client.start_request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": words}]}
    )
    frame = client.response_frame(rid, timeout)
    if "error" in frame.message:
        raise RpcError(frame.message["error"])
    return frame.message["result"]["stopReason"], frame.seq


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


def run_command(client: AcpClient, session_id: str, line: str, timeout: float = 60.0) -> str:
    """Send one prompt line (a slash command) and return the agent's reply text sent before the answer."""
    seen = len(client.frames)
    rid = client.start_request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": line}]}
    )
    response = client.response_frame(rid, timeout)
    assert response.message["result"]["stopReason"] == "end_turn", response.message
    return "".join(
        f.message["params"]["update"]["content"]["text"]
        for f in client.frames[seen:]
        if f.seq < response.seq
        and f.message.get("method") == "session/update"
        and f.message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
