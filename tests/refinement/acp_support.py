"""Driving the real server over real stdio for refinement tests (the acp_server test client and helpers).

The client validates every frame against the ACP schema models and flags anything on stdout that is
not a JSON-RPC line; `Servers` fails the test at teardown if any server did either.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from acp_client import AcpClient, Frame, RpcError, close_and_check, select, server_env
from acp_helpers import initialize, new_session, prompt

__all__ = ["AcpClient", "Frame", "RpcError", "Servers", "new_session", "prompt", "select"]


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
        env = server_env(self.home, self.model_url)
        client = AcpClient(env, cwd=str(cwd))
        self.clients.append(client)
        # Opted in to `_harness/quiescence` (only clients that ask get it).
        initialize(client, _meta={"continual-acp": {"quiescence": True}})
        return client

    def close(self) -> list[str]:
        problems: list[str] = []
        for client in self.clients:
            problems += close_and_check(client)
        return problems


@contextmanager
def servers(home: Path, model_url: str, *, config: str = "") -> Iterator[Servers]:
    group = Servers(home, model_url, config=config)
    try:
        yield group
    finally:
        problems = group.close()
    assert not problems, "\n".join(problems)


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
