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


def test_a_child_that_sends_a_message_is_still_delivered_with_its_final_answer_marked_as_having_sent(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    routes = {
        "[[talker]]": [cell('await agents.send("halfway there", to="parent")'), text("talker done")],
    }
    parent = [
        cell(
            """
            import json
            await agents.spawn("[[talker]] report progress", name="talker")
            seen = []
            while not any(m.get("final") for m in seen):
                seen += await agents.inbox(wait=True, timeout=90)
            print(json.dumps([[m["from"], m["kind"], m["text"], m.get("sent_messages")] for m in seen]))
            """
        ),
        text("ok"),
    ]
    with ScriptedModelServer(parent, routes=routes) as model:
        client, sid = start(spawn, model, tmp_path)
        assert prompt(client, sid, "delegate", timeout=WAIT)[0] == "end_turn"
        assert json.loads(last_tool_result(model)) == [
            ["talker", "message", "halfway there", None],
            ["talker", "final", "talker done", True],
        ]


def wait_for_file(path: str) -> str:
    return f"import os, time\nwhile not os.path.exists({path!r}):\n    time.sleep(0.05)\nprint('released')"


def test_a_fourth_child_is_queued_while_three_run_and_runs_when_a_slot_frees(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    release = str(tmp_path / "release")
    routes = {f"[[q{i}]]": [tool_call(wait_for_file(release)), text(f"q{i} done")] for i in range(1, 5)}
    parent = [
        cell(
            f"""
            import json
            states = [(await agents.spawn(f"[[q{{i}}]] wait", name=f"q{{i}}"))["state"] for i in range(1, 5)]
            print(json.dumps(states))
            open({release!r}, "w").close()
            """
        ),
        cell(collect(4)),
        text("all four done"),
    ]
    with ScriptedModelServer(parent, routes=routes) as model:
        client, sid = start(spawn, model, tmp_path)
        assert prompt(client, sid, "four children", timeout=WAIT * 2)[0] == "end_turn"
        parent_requests = [r for r in model.requests if "[[" not in _first_user(r)]
        assert json.loads(tool_results(parent_requests[1])[-1]) == ["running", "running", "running", "queued"]
        finals = json.loads(last_tool_result(model))
        assert {name: value[0] for name, value in finals.items()} == {
            f"q{i}": "finished" for i in range(1, 5)
        }


def test_a_grandchild_cannot_spawn_beyond_the_depth_limit(spawn: ClientFactory, tmp_path: Path) -> None:
    routes = {
        "[[depth-1]]": [
            cell(
                """
                import json
                await agents.spawn("[[depth-2]] go deeper", name="inner")
                finals = []
                while not finals:
                    finals = [m for m in await agents.inbox(wait=True, timeout=90) if m.get("final")]
                print(finals[0]["text"])
                """
            ),
            text("relayed"),
        ],
        "[[depth-2]]": [
            cell(
                """
                try:
                    await agents.spawn("[[depth-3]] too deep")
                except Exception as exc:
                    print("refused:", exc)
                """
            ),
            text("grandchild saw the limit"),
        ],
    }
    parent = [
        cell('await agents.spawn("[[depth-1]] delegate further", name="outer")'),
        cell(collect(1)),
        text("done"),
    ]
    with ScriptedModelServer(parent, routes=routes) as model:
        client, sid = start(spawn, model, tmp_path)
        assert prompt(client, sid, "nest", timeout=WAIT * 2)[0] == "end_turn"
        grandchild = model.requests_for("[[depth-2]]")
        assert "depth limit" in tool_results(grandchild[-1])[-1]
        assert model.requests_for("[[depth-3]]") == []
        assert "grandchild saw the limit" in tool_results(model.requests_for("[[depth-1]]")[-1])[-1]


def test_cancelling_one_child_delivers_its_cancellation_and_leaves_its_sibling_finishing(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    never = str(tmp_path / "never")
    routes = {
        "[[slow]]": [tool_call(wait_for_file(never)), text("slow should not answer")],
        "[[quick]]": [text("quick answer")],
    }
    parent = [
        cell(
            """
            await agents.spawn("[[slow]] wait forever", name="slow")
            await agents.spawn("[[quick]] answer at once", name="quick")
            print((await agents.cancel("slow"))["state"])
            """
        ),
        cell(collect(2)),
        text("done"),
    ]
    with ScriptedModelServer(parent, routes=routes) as model:
        client, sid = start(spawn, model, tmp_path)
        assert prompt(client, sid, "cancel one", timeout=WAIT)[0] == "end_turn"
        finals = json.loads(last_tool_result(model))
        assert finals["slow"][0] == "cancelled"
        assert "cancelled by its parent" in finals["slow"][1]
        assert finals["quick"] == ["finished", "quick answer", False]
