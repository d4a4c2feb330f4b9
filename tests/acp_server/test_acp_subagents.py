"""Subagents over real stdio: a real server, real kernels, one scripted endpoint routing parent and
children by a marker in each child's task (its first user message).

One server and one scripted endpoint serve most tests (`served`): each test scripts its parent and
routes, opens its own session in its own folder, reads only the requests and frames that arrived
since it began, and closes its session at its end (which cancels a child still running, so the
server-wide running limit starts free for the next test). A test that restarts the server, needs its
own home or advertises other client capabilities starts its own (`spawn`).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, Frame, close_and_check, server_env
from acp_helpers import ClientFactory, initialize, new_session, prompt

from agent_core.testing.scripted_model import Response, ScriptedModelServer, response, text, tool_call

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


def last_tool_result(requests: list[dict[str, Any]], index: int = -1) -> str:
    # Chat requests only: under load the endpoint's log once held a body without messages.
    parent_requests = [r for r in requests if "messages" in r and "[[" not in _first_user(r)]
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


# ---------------------------------------------------------------- one server for the module


@dataclass
class Shared:
    model: ScriptedModelServer
    client: AcpClient


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    home = tmp_path_factory.mktemp("subagents-home")
    with ScriptedModelServer() as model:
        client = AcpClient(server_env(home, model.base_url), cwd=str(home))
        initialize(client)
        try:
            yield Shared(model, client)
        finally:
            problems = close_and_check(client)
        assert not problems, "\n".join(problems)


@dataclass
class Here:
    """One test on the shared server: its session, and where the shared logs stood when it began."""

    model: ScriptedModelServer
    client: AcpClient
    sid: str
    requests_at: int
    frames_at: int
    asked_at: int

    def requests(self) -> list[dict[str, Any]]:
        """The chat requests of this test (the endpoint's log holds the earlier tests' too)."""
        return self.model.requests[self.requests_at :]

    def agent_requests(self) -> list[dict[str, Any]]:
        return self.client.agent_requests[self.asked_at :]

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> Frame:
        """The first matching message about this test's session since it began (a late one of an
        earlier test's session must not match)."""

        def mine(message: dict[str, Any]) -> bool:
            return message.get("params", {}).get("sessionId") == self.sid and predicate(message)

        return self.client.wait_for_after(self.frames_at, mine, timeout)


Serve = Callable[[Sequence[Response], Mapping[str, Sequence[Response]]], Here]


@pytest.fixture
def served(shared: Shared, tmp_path: Path) -> Iterator[Serve]:
    """Script the shared endpoint (parent, routes) and open this test's session in `tmp_path`; at the
    test's end close it and drop what is left of the script."""
    opened: list[str] = []

    def serve(parent: Sequence[Response], routes: Mapping[str, Sequence[Response]]) -> Here:
        model, client = shared.model, shared.client
        at = (len(model.requests), len(client.frames), len(client.agent_requests))
        model.push(*parent)
        for marker, script in routes.items():
            model.push_route(marker, *script)
        sid, _ = new_session(client, str(tmp_path))
        opened.append(sid)
        return Here(model, client, sid, *at)

    try:
        yield serve
    finally:
        for sid in opened:
            try:
                shared.client.request("session/close", {"sessionId": sid}, timeout=WAIT)
            except Exception:  # closed by the test itself, or broken: must not hide the test's failure
                pass
        shared.model.clear_script()


def test_parent_collects_the_final_answers_of_two_children_that_run_real_cells(
    served: Serve, tmp_path: Path
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
    here = served(parent, routes)
    client, sid, model = here.client, here.sid, here.model
    stop, _ = prompt(client, sid, "delegate two computations", timeout=WAIT)
    assert stop == "end_turn"
    answers = json.loads(last_tool_result(here.requests()))
    assert answers == {
        "a": ["finished", "answer-a: 42", False],
        "b": ["finished", "answer-b: 1024", False],
    }
    child_a = model.requests_for("[[child-a]]")
    assert "42" in tool_results(child_a[-1])[-1]  # the child's cell really ran in its kernel


def test_a_child_that_sends_a_message_is_still_delivered_with_its_final_answer_marked_as_having_sent(
    served: Serve, tmp_path: Path
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
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "delegate", timeout=WAIT)[0] == "end_turn"
    assert json.loads(last_tool_result(here.requests())) == [
        ["talker", "message", "halfway there", None],
        ["talker", "final", "talker done", True],
    ]


def wait_for_file(path: str) -> str:
    return f"import os, time\nwhile not os.path.exists({path!r}):\n    time.sleep(0.05)\nprint('released')"


def held_answer(hold: str, answer: str) -> Response:
    """A child's model reply that waits until the test calls `model.release(hold)`, then answers.

    For a child that only has to stay running: it waits at its model, so it never starts a kernel (a
    kernel start is about a second of CPU). Children that must be busy in a cell (cancelled, killed,
    interrupted by a restart) wait in one with `wait_for_file` instead."""
    return response([{"hold": hold}, {"content": answer}])


def hold_name(tmp_path: Path) -> str:
    """A hold name of this test only: the endpoint is shared, and a released hold stays released."""
    return f"hold-{tmp_path.name}"


def test_a_fourth_child_is_queued_while_three_run_and_runs_when_a_slot_frees(
    served: Serve, tmp_path: Path
) -> None:
    hold = hold_name(tmp_path)
    routes = {f"[[q{i}]]": [held_answer(hold, f"q{i} done")] for i in range(1, 5)}
    parent = [
        cell(
            """
            import json
            states = [(await agents.spawn(f"[[q{i}]] wait", name=f"q{i}"))["state"] for i in range(1, 5)]
            print(json.dumps(states))
            """
        ),
        cell(collect(4)),
        text("all four done"),
    ]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "four children"}]}
    )
    here.wait_for(  # the spawning cell ended: the four states are taken, three children hold at their model
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") == "tool_call_update"
            and not m["params"]["update"]["toolCallId"].startswith("subagent-")
            and m["params"]["update"].get("status") in ("completed", "failed")
        ),
        WAIT,
    )
    here.model.release(hold)
    assert client.result(rid, WAIT * 2)["stopReason"] == "end_turn"
    parent_requests = [r for r in here.requests() if "[[" not in _first_user(r)]
    assert json.loads(tool_results(parent_requests[1])[-1]) == ["running", "running", "running", "queued"]
    finals = json.loads(last_tool_result(here.requests()))
    assert {name: value[0] for name, value in finals.items()} == {f"q{i}": "finished" for i in range(1, 5)}


def test_a_grandchild_cannot_spawn_beyond_the_depth_limit(served: Serve, tmp_path: Path) -> None:
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
    here = served(parent, routes)
    client, sid, model = here.client, here.sid, here.model
    assert prompt(client, sid, "nest", timeout=WAIT * 2)[0] == "end_turn"
    grandchild = model.requests_for("[[depth-2]]")
    assert "depth limit" in tool_results(grandchild[-1])[-1]
    assert model.requests_for("[[depth-3]]") == []
    assert "grandchild saw the limit" in tool_results(model.requests_for("[[depth-1]]")[-1])[-1]


def test_cancelling_one_child_delivers_its_cancellation_and_leaves_its_sibling_finishing(
    served: Serve, tmp_path: Path
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
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "cancel one", timeout=WAIT)[0] == "end_turn"
    finals = json.loads(last_tool_result(here.requests()))
    assert finals["slow"][0] == "cancelled"
    assert "cancelled by its parent" in finals["slow"][1]
    assert finals["quick"] == ["finished", "quick answer", False]


def test_a_child_whose_kernel_dies_fails_with_the_reason_and_the_parent_keeps_working(
    served: Serve, tmp_path: Path
) -> None:
    import os
    import signal

    never = str(tmp_path / "never")
    routes = {
        "[[victim]]": [
            tool_call("import os\nawait agents.send(str(os.getpid()))\n" + wait_for_file(never)),
            text("victim should not answer"),
        ]
    }
    parent = [
        tool_call(
            textwrap.dedent(
                """
                await agents.spawn("[[victim]] hold on", name="victim")
                first = await agents.inbox(wait=True, timeout=90)
                print("PID", first[0]["text"], flush=True)
                """
            )
            + collect(1)
        ),
        cell('print("parent alive", 1 + 1)'),
        text("done"),
    ]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "kill test"}]}
    )
    frame = here.wait_for(lambda m: "PID " in json.dumps(m.get("params", {}).get("update", {})), WAIT)
    pid = int(json.dumps(frame.message["params"]["update"]).split("PID ")[1].split("\\")[0].split('"')[0])
    os.kill(pid, signal.SIGKILL)
    assert client.result(rid, WAIT)["stopReason"] == "end_turn"
    parent_requests = [r for r in here.requests() if "[[" not in _first_user(r)]
    finals = json.loads(tool_results(parent_requests[1])[-1].strip().splitlines()[-1])
    assert finals["victim"][0] == "failed"
    assert "kernel died" in finals["victim"][1]
    assert "parent alive 2" in last_tool_result(here.requests())


def test_a_child_whose_model_fails_is_failed_with_the_model_error(served: Serve, tmp_path: Path) -> None:
    from agent_core.testing.scripted_model import error

    routes = {"[[broken]]": [error(400, "the scripted model refuses this child")]}
    parent = [cell('await agents.spawn("[[broken]] try", name="broken")\n' + collect(1)), text("done")]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "model failure", timeout=WAIT)[0] == "end_turn"
    finals = json.loads(last_tool_result(here.requests()))
    assert finals["broken"][0] == "failed"
    assert "refuses this child" in finals["broken"][1]


def subagent_updates(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if str(u.get("toolCallId", "")).startswith("subagent-")]


def test_the_spawn_card_follows_the_child_after_the_parent_turn_ended_and_ends_with_its_answer(
    served: Serve, tmp_path: Path
) -> None:
    hold = hold_name(tmp_path)
    routes = {"[[late]]": [held_answer(hold, "late answer: 7")]}
    parent = [cell('await agents.spawn("[[late]] finish after the parent", name="late")'), text("spawned")]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    stop, answered_at = prompt(client, sid, "spawn and end", timeout=WAIT)
    assert stop == "end_turn"
    here.model.release(hold)
    done = here.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"].get("toolCallId", "").startswith("subagent-")
            and m["params"]["update"].get("status") == "completed"
        ),
        WAIT,
    )
    assert done.seq > answered_at
    card = subagent_updates(client, sid)
    assert card[0]["sessionUpdate"] == "tool_call"
    meta = card[0]["_meta"]["continual-acp"]["subagent"]
    assert (meta["name"], meta["parentSessionId"], meta["state"]) == ("late", sid, "running")
    final = done.message["params"]["update"]
    assert final["_meta"]["continual-acp"]["subagent"]["state"] == "finished"
    assert "late answer: 7" in json.dumps(final["content"])
    unstable = [u for u in client.updates(sid) if u["sessionUpdate"] == "subagent_update"]
    assert unstable == [], "a client that did not advertise `subagents` got subagent_update"


def test_a_client_that_advertises_subagents_hears_the_child_life_as_subagent_update_and_no_card(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    parent = [cell('await agents.spawn("[[told]] answer", name="told")\n' + collect(1)), text("done")]
    routes = {"[[told]]": [text("told answer: 3")]}
    with ScriptedModelServer(parent, routes=routes) as model:
        client = spawn(model.base_url)
        initialize(client, subagents={})
        sid, _ = new_session(client, str(tmp_path))
        assert prompt(client, sid, "spawn one", timeout=WAIT)[0] == "end_turn"
        client.wait_for(
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["update"].get("sessionUpdate") == "subagent_update"
                and m["params"]["update"]["_meta"]["continual-acp"]["subagent"]["state"] == "finished"
            ),
            WAIT,
        )
        updates = [u for u in client.updates(sid) if u["sessionUpdate"] == "subagent_update"]
        assert {u["sessionId"] for u in updates} == {updates[0]["sessionId"]} != {sid}
        assert updates[0]["title"] == "told" and "[[told]] answer" in updates[0]["description"]
        assert updates[0]["state"] == {"state": "running"}
        assert updates[-1]["state"] == {"state": "idle"}
        assert subagent_updates(client, sid) == [], "the card went to a client that reads subagent_update"
        assert client.violations == [], client.violations  # each checked against the unstable schema


def test_agents_command_lists_children_and_cancels_one_by_name(served: Serve, tmp_path: Path) -> None:
    from acp_helpers import run_command

    never = str(tmp_path / "never")
    routes = {"[[sleeper]]": [tool_call(wait_for_file(never)), text("never")]}
    parent = [cell('await agents.spawn("[[sleeper]] wait", name="sleeper")'), text("spawned")]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "spawn", timeout=WAIT)[0] == "end_turn"
    listing = run_command(client, sid, "/agents")
    assert "`sleeper` **running**" in listing
    reply = run_command(client, sid, "/agents cancel sleeper")
    assert "Cancelled subagent `sleeper` (now cancelled)" in reply
    assert "`sleeper` **cancelled**" in run_command(client, sid, "/agents")


def test_cancelling_the_parent_prompt_leaves_its_children_running(served: Serve, tmp_path: Path) -> None:
    from acp_helpers import run_command

    never = str(tmp_path / "never")
    routes = {"[[stays]]": [tool_call(wait_for_file(never)), text("never")]}
    parent = [
        cell(
            'await agents.spawn("[[stays]] wait", name="stays")\nprint("SPAWN" + "ED", flush=True)\n'
            + wait_for_file(never)
        )
    ]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "spawn then hang"}]}
    )
    here.wait_for(lambda m: "SPAWNED" in json.dumps(m.get("params", {}).get("update", {})), WAIT)
    client.notify("session/cancel", {"sessionId": sid})
    assert client.result(rid, WAIT)["stopReason"] == "cancelled"
    assert "`stays` **running**" in run_command(client, sid, "/agents")


def list_entries(client: AcpClient, cwd: Path) -> dict[str, dict[str, Any]]:
    result = client.request("session/list", {"cwd": str(cwd)})
    return {s["sessionId"]: s for s in result["sessions"]}


def test_session_list_shows_each_child_with_its_parent_in_meta(served: Serve, tmp_path: Path) -> None:
    routes = {"[[listed]]": [text("listed answer")]}
    parent = [cell('await agents.spawn("[[listed]] answer", name="listed")\n' + collect(1)), text("done")]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "spawn", timeout=WAIT)[0] == "end_turn"
    entries = list_entries(client, tmp_path)
    children = [e for e in entries.values() if "_meta" in e]
    assert [c["_meta"]["continual-acp"] for c in children] == [
        {"parentSessionId": sid, "subagent": {"name": "listed", "state": "finished"}}
    ]
    assert children[0]["title"] == "Subagent listed: [[listed]] answer"
    assert "_meta" not in entries[sid]


def test_closing_the_parent_session_cancels_its_running_children(served: Serve, tmp_path: Path) -> None:
    never = str(tmp_path / "never")
    routes = {"[[orphan]]": [tool_call(wait_for_file(never)), text("never")]}
    parent = [cell('await agents.spawn("[[orphan]] wait", name="orphan")'), text("spawned")]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "spawn", timeout=WAIT)[0] == "end_turn"
    client.request("session/close", {"sessionId": sid}, timeout=WAIT)
    children = [e for e in list_entries(client, tmp_path).values() if "_meta" in e]
    assert [c["_meta"]["continual-acp"]["subagent"]["state"] for c in children] == ["cancelled"]


def test_links_survive_a_restart_and_a_running_child_is_interrupted_by_restart(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    from acp_helpers import run_command

    home = tmp_path / "shared-home"
    home.mkdir()
    never = str(tmp_path / "never")
    routes = {"[[cut]]": [tool_call(wait_for_file(never)), text("never")]}
    parent = [cell('await agents.spawn("[[cut]] wait", name="cut")'), text("spawned")]
    with ScriptedModelServer(parent, routes=routes) as model:
        first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
        initialize(first)
        sid, _ = new_session(first, str(tmp_path))
        assert prompt(first, sid, "spawn", timeout=WAIT)[0] == "end_turn"
        model.wait_for_requests(2)
        assert first.close() == 0
        second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
        initialize(second)
        children = [e for e in list_entries(second, tmp_path).values() if "_meta" in e]
        assert [c["_meta"]["continual-acp"] for c in children] == [
            {"parentSessionId": sid, "subagent": {"name": "cut", "state": "interrupted"}}
        ]
        second.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}, timeout=WAIT
        )
        listing = run_command(second, sid, "/agents")
        assert "`cut` **interrupted**" in listing
        assert "interrupted by restart" in listing


def test_a_harness_spec_gives_the_child_its_instructions_and_preferred_model(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    from harness_store import HarnessStore

    home = tmp_path / "spec-home"
    (home / "harness").mkdir(parents=True)
    HarnessStore(home / "harness").apply(
        {
            "summary": "a reviewer spec",
            "edits": [
                {
                    "action": "create",
                    "kind": "subagent",
                    "id": "reviewer",
                    "title": "Code reviewer",
                    "content": "Review with care; answer in one line.",
                    "metadata": {"model": "reviewer-model"},
                }
            ],
        },
        scope="global",
        trigger="user",
        source="user",
    )
    routes = {"[[review]]": [text("looks fine")]}
    parent = [
        cell('await agents.spawn("[[review]] check a.py", name="rev", spec="reviewer")\n' + collect(1)),
        text("ok"),
    ]
    with ScriptedModelServer(parent, routes=routes, models=("scripted-model", "reviewer-model")) as model:
        client = spawn(
            model.base_url, CONTINUAL_ACP_HOME=str(home), CONTINUAL_ACP_REFINE_MODEL="reviewer-model"
        )
        initialize(client)
        sid, _ = new_session(client, str(tmp_path))
        assert prompt(client, sid, "review", timeout=WAIT)[0] == "end_turn"
        (request,) = model.requests_for("[[review]]")
        assert request["model"] == "reviewer-model"
        assert "Review with care; answer in one line." in _first_user(request)
        assert json.loads(last_tool_result(model.requests))["rev"][0] == "finished"


def test_a_childs_permission_request_reaches_the_parents_editor_with_the_child_named(
    served: Serve, tmp_path: Path
) -> None:
    routes = {"[[asker]]": [cell("print('child ran ' + str(3 * 3))"), text("asker done")]}
    parent = [cell('await agents.spawn("[[asker]] run a cell", name="asker")\n' + collect(1)), text("done")]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    client.request("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "ask"})
    assert prompt(client, sid, "ask mode", timeout=WAIT)[0] == "end_turn"
    asked = [r["params"] for r in here.agent_requests() if r["method"] == "session/request_permission"]
    assert [p["sessionId"] for p in asked] == [sid, sid]  # the parent's cell, then the child's
    child_card = asked[1]["toolCall"]
    assert child_card["title"] == "[subagent asker] print('child ran ' + str(3 * 3))"
    updates = [u for u in client.updates(sid) if u.get("toolCallId") == child_card["toolCallId"]]
    assert updates[-1]["status"] == "completed"
    assert json.loads(last_tool_result(here.requests()))["asker"][0] == "finished"


def test_a_child_session_can_be_loaded_in_the_editor_and_replays_its_task_and_answer(
    served: Serve, tmp_path: Path
) -> None:
    routes = {"[[loadable]]": [text("loadable answer")]}
    parent = [cell('await agents.spawn("[[loadable]] answer", name="loadable")\n' + collect(1)), text("done")]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "spawn", timeout=WAIT)[0] == "end_turn"
    (child_id,) = [k for k, e in list_entries(client, tmp_path).items() if "_meta" in e]
    client.request(
        "session/load", {"sessionId": child_id, "cwd": str(tmp_path), "mcpServers": []}, timeout=WAIT
    )
    replayed = json.dumps(client.updates(child_id))
    assert "[[loadable]] answer" in replayed  # the task, as the child's first prompt
    assert "loadable answer" in replayed


def test_harness_status_counts_the_running_subagents_until_they_end(served: Serve, tmp_path: Path) -> None:
    hold = hold_name(tmp_path)
    routes = {"[[counted]]": [held_answer(hold, "counted done")]}
    parent = [cell('await agents.spawn("[[counted]] wait", name="counted")'), text("spawned")]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "spawn", timeout=WAIT)[0] == "end_turn"
    assert client.request("_harness/status", {"sessionId": sid})["runningSubagents"] == 1
    here.model.release(hold)
    here.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"]
            .get("_meta", {})
            .get("continual-acp", {})
            .get("subagent", {})
            .get("state")
            == "finished"
        ),
        WAIT,
    )
    assert "runningSubagents" not in client.request("_harness/status", {"sessionId": sid})


def test_observe_gives_a_bounded_summary_with_only_the_last_cells(served: Serve, tmp_path: Path) -> None:
    routes = {
        "[[busy]]": [tool_call(f"print('step {i}')", title=f"step {i}") for i in range(1, 8)]
        + [text("busy done")]
    }
    parent = [
        cell(
            """
            import json
            await agents.spawn("[[busy]] seven steps", name="busy")
            while not [m for m in await agents.inbox(wait=True, timeout=90) if m.get("final")]:
                pass
            seen = await agents.observe("busy")
            print(json.dumps([seen["state"], seen["cells_run"], [c["title"] for c in seen["last_cells"]], seen["last_messages"][-1]]))
            """
        ),
        text("observed"),
    ]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "observe", timeout=WAIT * 2)[0] == "end_turn"
    state, cells_run, titles, last = json.loads(last_tool_result(here.requests()))
    assert (state, cells_run, last) == ("finished", 7, "busy done")
    assert titles == [f"step {i}" for i in range(3, 8)]


def quiescence_mirror(update: dict[str, Any]) -> dict[str, Any] | None:
    """The `_meta["continual-acp"].quiescence` of a `session_info_update` (None for other updates)."""
    mirror = update.get("_meta", {}).get("continual-acp", {}).get("quiescence")
    return None if mirror is None else dict(mirror)


def background_work(update: dict[str, Any]) -> list[dict[str, Any]] | None:
    mirror = quiescence_mirror(update)
    return None if mirror is None else list(mirror["background"])


def test_the_background_work_mirror_lists_running_children_until_they_settle(
    served: Serve, tmp_path: Path
) -> None:
    hold = hold_name(tmp_path)
    routes = {"[[bg]]": [held_answer(hold, "bg done")]}
    parent = [cell('await agents.spawn("[[bg]] wait", name="bg")'), text("spawned")]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "spawn", timeout=WAIT)[0] == "end_turn"
    mirrors = [w for u in client.updates(sid) if (w := background_work(u)) is not None]
    assert [(s["name"], s["state"], s["parentSessionId"]) for s in mirrors[-1]] == [("bg", "running", sid)]
    here.model.release(hold)
    here.wait_for(
        lambda m: m.get("method") == "session/update" and background_work(m["params"]["update"]) == [],
        WAIT,
    )


def test_agents_command_answers_while_the_parent_turn_is_still_waiting(served: Serve, tmp_path: Path) -> None:
    from acp_helpers import run_command

    hold = hold_name(tmp_path)
    routes = {"[[held]]": [held_answer(hold, "held done")]}
    parent = [
        cell(
            'await agents.spawn("[[held]] wait", name="held")\nprint("SPAWN" + "ED", flush=True)\n'
            + collect(1)
        ),
        text("done"),
    ]
    here = served(parent, routes)
    client, sid = here.client, here.sid
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "spawn and wait"}]}
    )
    here.wait_for(lambda m: "SPAWNED" in json.dumps(m.get("params", {}).get("update", {})), WAIT)
    assert "`held` **running**" in run_command(client, sid, "/agents")
    here.model.release(hold)
    assert client.result(rid, WAIT)["stopReason"] == "end_turn"


def _held_child(tmp_path: Path) -> tuple[str, list[Response], dict[str, list[Response]]]:
    """A parent script spawning one child `held` that runs until the test releases the hold named
    first."""
    hold = hold_name(tmp_path)
    routes = {"[[held]]": [held_answer(hold, "held done")]}
    parent = [cell('await agents.spawn("[[held]] wait", name="held")'), text("spawned")]
    return hold, parent, routes


def test_harness_status_is_not_quiescent_while_a_child_runs(served: Serve, tmp_path: Path) -> None:
    hold, parent, routes = _held_child(tmp_path)
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "spawn", timeout=WAIT)[0] == "end_turn"
    assert client.request("_harness/status", {"sessionId": sid})["quiescent"] is False
    here.model.release(hold)
    assert client.request("_harness/await_quiescence", {"sessionId": sid, "timeoutMs": WAIT * 1000})[
        "quiescent"
    ]
    assert client.request("_harness/status", {"sessionId": sid})["quiescent"] is True


def test_await_quiescence_waits_for_a_running_child(served: Serve, tmp_path: Path) -> None:
    hold, parent, routes = _held_child(tmp_path)
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "spawn", timeout=WAIT)[0] == "end_turn"
    held = client.request("_harness/await_quiescence", {"sessionId": sid, "timeoutMs": 300})
    assert held["quiescent"] is False  # the child still runs: not settled
    waiting = client.start_request("_harness/await_quiescence", {"sessionId": sid, "timeoutMs": WAIT * 1000})
    here.model.release(hold)
    assert client.result(waiting, timeout=WAIT)["quiescent"] is True


def test_the_quiescence_mirror_is_not_quiescent_while_a_child_runs_and_settles_with_it(
    served: Serve, tmp_path: Path
) -> None:
    hold, parent, routes = _held_child(tmp_path)
    here = served(parent, routes)
    client, sid = here.client, here.sid
    assert prompt(client, sid, "spawn", timeout=WAIT)[0] == "end_turn"
    mirrors = [m for u in client.updates(sid) if (m := quiescence_mirror(u)) is not None]
    assert mirrors[-1]["quiescent"] is False
    assert [b["type"] for b in mirrors[-1]["background"]] == ["session"]
    here.model.release(hold)
    settled = here.wait_for(
        lambda m: m.get("method") == "session/update" and background_work(m["params"]["update"]) == [],
        WAIT,
    )
    assert quiescence_mirror(settled.message["params"]["update"]) == {
        "quiescent": True,
        "pending": 0,
        "background": [],
    }


def test_loading_the_parent_after_a_restart_replays_the_child_card_with_its_final_state_or_its_subagent_updates(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    home = tmp_path / "shared-home"
    home.mkdir()
    routes = {"[[replayed]]": [text("replayed answer")]}
    parent = [cell('await agents.spawn("[[replayed]] answer", name="replayed")\n' + collect(1)), text("done")]
    with ScriptedModelServer(parent, routes=routes) as model:
        first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
        initialize(first)
        sid, _ = new_session(first, str(tmp_path))
        assert prompt(first, sid, "spawn", timeout=WAIT)[0] == "end_turn"
        assert first.close() == 0
        second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
        initialize(second)
        second.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}, timeout=WAIT
        )
        cards = [
            u
            for u in second.updates(sid)
            if u["sessionUpdate"] in ("tool_call", "tool_call_update")
            and str(u.get("toolCallId", "")).startswith("subagent-")
        ]
        assert cards[0]["sessionUpdate"] == "tool_call"
        last = cards[-1]
        assert last["status"] == "completed"
        assert last["_meta"]["continual-acp"]["subagent"]["state"] == "finished"
        assert "replayed answer" in json.dumps(last["content"])
        assert [u for u in second.updates(sid) if u["sessionUpdate"] == "subagent_update"] == []
        assert second.close() == 0
        # A client that reads `subagent_update` gets the same life replayed that way, as it heard it live.
        third = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
        initialize(third, subagents={})
        third.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}, timeout=WAIT
        )
        replayed = [u for u in third.updates(sid) if u["sessionUpdate"] == "subagent_update"]
        assert [u["sessionId"] for u in replayed] == [
            cards[0]["_meta"]["continual-acp"]["subagent"]["sessionId"]
        ] * len(replayed)
        assert replayed[0]["state"] == {"state": "running"} and replayed[-1]["state"] == {"state": "idle"}
        assert replayed[-1]["_meta"]["continual-acp"]["subagent"]["state"] == "finished"
        assert subagent_updates(third, sid) == [], (
            "a replayed card went to a client that reads subagent_update"
        )
        assert third.violations == [], third.violations


def test_loading_the_parent_shows_a_child_cut_by_a_restart_as_interrupted_on_its_card(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    home = tmp_path / "shared-home"
    home.mkdir()
    never = str(tmp_path / "never")
    routes = {"[[cut]]": [tool_call(wait_for_file(never)), text("never")]}
    parent = [cell('await agents.spawn("[[cut]] wait", name="cut")'), text("spawned")]
    with ScriptedModelServer(parent, routes=routes) as model:
        first = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
        initialize(first)
        sid, _ = new_session(first, str(tmp_path))
        assert prompt(first, sid, "spawn", timeout=WAIT)[0] == "end_turn"
        model.wait_for_requests(2)
        assert first.close() == 0
        second = spawn(model.base_url, CONTINUAL_ACP_HOME=str(home))
        initialize(second)
        second.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}, timeout=WAIT
        )
        states = [
            u["_meta"]["continual-acp"]["subagent"]["state"]
            for u in second.updates(sid)
            if str(u.get("toolCallId", "")).startswith("subagent-")
        ]
        assert states[-1] == "interrupted"
