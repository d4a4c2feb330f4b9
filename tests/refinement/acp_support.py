"""Driving the real server over real stdio for refinement tests (reuses the acp_server test client).

The client validates every frame against the ACP schema models and flags anything on stdout that is
not a JSON-RPC line; `Servers` fails the test at teardown if any server did either.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "acp_server"))

from acp_client import AcpClient, Frame, RpcError, select, server_env

__all__ = ["AcpClient", "Frame", "RpcError", "Servers", "select"]


class Servers:
    """Spawns servers that share one data home (so a second process sees the first one's store)."""

    def __init__(self, home: Path, model_url: str, *, config: str = "") -> None:
        self.home = home
        self.model_url = model_url
        self.clients: list[AcpClient] = []
        xdg = home / "xdg-config" / "continual-acp"
        xdg.mkdir(parents=True, exist_ok=True)
        (xdg / "config.toml").write_text(config, encoding="utf-8")

    def spawn(self, cwd: Path) -> AcpClient:
        env = server_env(self.home, self.model_url, CONTINUAL_ACP_KERNEL_POOL="0", HOME=str(self.home))
        client = AcpClient(env, cwd=str(cwd))
        self.clients.append(client)
        client.request(
            "initialize",
            {
                "protocolVersion": 1,
                # Opted in to `_harness/quiescence` (only clients that ask get it).
                "clientCapabilities": {"_meta": {"continual-acp": {"quiescence": True}}},
                "clientInfo": {"name": "pytest", "version": "1"},
            },
        )
        return client

    def close(self) -> list[str]:
        problems: list[str] = []
        for client in self.clients:
            if client.proc.poll() is None:
                client.close()
            problems += [f"non-JSON on stdout: {line[:200]!r}" for line in client.garbage]
            problems += client.violations
        return problems


@contextmanager
def servers(home: Path, model_url: str, *, config: str = "") -> Iterator[Servers]:
    group = Servers(home, model_url, config=config)
    try:
        yield group
    finally:
        problems = group.close()
    assert not problems, "\n".join(problems)


def new_session(client: AcpClient, cwd: Path) -> str:
    return str(client.request("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"])


def prompt(client: AcpClient, session_id: str, text: str, *, timeout: float = 60.0) -> Frame:
    rid = client.start_request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    )
    frame = client.response_frame(rid, timeout)
    if "error" in frame.message:
        raise RpcError(frame.message["error"])
    return frame


def messages_between(client: AcpClient, start: int, end: int) -> str:
    return "".join(
        f.message["params"]["update"]["content"]["text"]
        for f in client.frames
        if start < f.seq < end
        and f.message.get("method") == "session/update"
        and f.message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def refinement_cards(client: AcpClient, session_id: str) -> list[dict[str, Any]]:
    return [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call" and str(u.get("toolCallId", "")).startswith("refinement-")
    ]


def notifications(client: AcpClient, method: str) -> list[Frame]:
    return [f for f in client.frames if f.message.get("method") == method]


def plan_json(*edits: dict[str, Any], summary: str = "Remember the test command") -> str:
    return json.dumps(
        {"summary": summary, "rationale": "stated by the user", "expected_outcome": "x", "edits": list(edits)}
    )
