"""Subagents over real stdio: a real server, real kernels, one scripted endpoint routing parent and
children by a marker in each child's task (its first user message)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session, prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

WAIT = 120.0

COLLECT = """
got = {}
while len(got) < N:
    for m in await agents.inbox(wait=True, timeout=90):
        if m.get("final"):
            got[m["from"]] = m
print(json.dumps({k: [v["state"], v["text"], v["sent_messages"]] for k, v in sorted(got.items())}))
"""


def cell(code: str) -> dict[str, Any]:
    return tool_call(textwrap.dedent(code).strip())


def collect(n: int) -> str:
    return "import json\nN = " + str(n) + "\n" + COLLECT


def tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def last_tool_result(model: ScriptedModelServer, index: int = -1) -> str:
    parent_requests = [r for r in model.requests if "[[" not in _first_user(r)]
    return tool_results(parent_requests[index])[-1]


def _first_user(body: dict[str, Any]) -> str:
    first = next(m for m in body["messages"] if m.get("role") == "user")
    content = first.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def start(spawn: ClientFactory, model: ScriptedModelServer, cwd: Path) -> tuple[AcpClient, str]:
    client = spawn(model.base_url)
    initialize(client)
    sid, _ = new_session(client, str(cwd))
    return client, sid


def test_parent_collects_the_final_answers_of_two_children_that_run_real_cells(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    routes = {
        "[[child-a]]": [cell("print(6 * 7)"), text("answer-a: 42")],
        "[[child-b]]": [cell("print(2 ** 10)"), text("answer-b: 1024")],
    }
    parent = [
        cell(
            """
            a = await agents.spawn("[[child-a]] compute 6*7", name="a")
            b = await agents.spawn("[[child-b]] compute 2**10", name="b")
            print(a["state"], b["state"])
            """
        ),
        cell(collect(2)),
        text("both children answered"),
    ]
    with ScriptedModelServer(parent, routes=routes) as model:
        client, sid = start(spawn, model, tmp_path)
        stop, _ = prompt(client, sid, "delegate two computations", timeout=WAIT)
        assert stop == "end_turn"
        answers = json.loads(last_tool_result(model))
        assert answers == {
            "a": ["finished", "answer-a: 42", False],
            "b": ["finished", "answer-b: 1024", False],
        }
        child_a = model.requests_for("[[child-a]]")
        assert "42" in tool_results(child_a[-1])[-1]  # the child's cell really ran in its kernel
