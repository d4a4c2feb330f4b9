"""Every session method over real stdio against the real agent, kernel and scripted model endpoint.

The tests share one server (`served`: each its own folder and session, closed at its end, and reads
only what arrived since it began); the terminal test, whose client advertises terminal output,
starts its own (`spawn`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_client import RpcError, select
from acp_helpers import ClientFactory, final_card, initialize, new_session, prompt, texts
from shared_server import Here, SharedServers, shared_servers

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

COMMANDS = {"history", "harness", "rollback", "undo", "kernel", "compact", "refine", "review", "autonomous"}

Serve = Callable[..., Here]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    with shared_servers(tmp_path_factory) as made:
        yield made


@pytest.fixture
def served(servers: SharedServers, tmp_path: Path) -> Iterator[Serve]:
    """A session on the module's server, in the test's own folder."""
    with servers.test(tmp_path) as open_session:
        yield open_session


def test_new_session_answers_modes_and_config_options_then_advertises_commands(
    served: Serve, tmp_path: Any
) -> None:
    here = served()
    client = here.client
    rid = client.start_request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    response = client.response_frame(rid)
    result = response.message["result"]
    assert result["modes"]["currentModeId"] == "auto"
    assert {m["id"] for m in result["modes"]["availableModes"]} == {"ask", "auto", "autonomous"}
    options = {o["id"]: o for o in result["configOptions"]}
    assert set(options) == {"mode", "model", "refine_review", "wait_for_refinement"}
    assert options["mode"]["category"] == "mode" and options["mode"]["currentValue"] == "auto"
    assert options["model"]["category"] == "model"
    assert options["refine_review"]["currentValue"] == "global_only"
    advert = client.wait_for_after(
        here.frames_at,
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["sessionId"] == result["sessionId"]
            and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
        ),
    )
    assert advert.seq > response.seq, "commands must be advertised after the session/new response"
    names = {c["name"] for c in advert.message["params"]["update"]["availableCommands"]}
    assert COMMANDS <= names


def test_prompt_with_a_cell_streams_a_titled_tool_card_and_answers_after_every_update(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    here.model.push(tool_call("# compute the answer\nprint(6 * 7)"), text("The answer is 42."))
    stop, response_seq = prompt(client, sid, "what is six times seven?")
    assert stop == "end_turn"
    start, updates = final_card(client, sid)
    assert start["kind"] == "execute"
    assert start["title"] == "compute the answer"
    assert start["rawInput"] == {"code": "# compute the answer\nprint(6 * 7)"}
    assert start["content"][0]["content"]["text"].startswith("```python\n# compute the answer")
    assert any(u.get("status") == "in_progress" for u in updates)
    assert updates[-1]["status"] == "completed"
    assert "42" in texts(updates[-1]["content"])
    chunks = [u for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(c["content"]["text"] for c in chunks).endswith("The answer is 42.")
    turn_frames = [
        f
        for f in client.update_frames()
        if f.seq > here.frames_at
        and here.mine(f.message)
        and f.message["params"]["update"]["sessionUpdate"] != "available_commands_update"
    ]
    assert all(f.seq < response_seq for f in turn_frames), "an update arrived after the prompt response"
    assert any(u["sessionUpdate"] == "session_info_update" and u.get("title") for u in client.updates(sid))


def test_failed_cell_is_marked_failed_and_shows_the_exception(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    here.model.push(tool_call("1 / 0", title="Divide by zero"), text("That failed."))
    assert prompt(client, sid, "divide")[0] == "end_turn"
    start, updates = final_card(client, sid)
    assert start["title"] == "Divide by zero"
    assert updates[-1]["status"] == "failed"
    assert "ZeroDivisionError" in texts(updates[-1]["content"])


def test_terminal_trio_is_sent_when_the_client_advertises_terminal_output(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Any
) -> None:
    model.push(tool_call("print('hello terminal')"), text("done"))
    client = spawn(model.base_url)
    initialize(client, _meta={"terminal_output": True})
    sid, _ = new_session(client, str(tmp_path))
    assert prompt(client, sid, "say hello")[0] == "end_turn"
    start, updates = final_card(client, sid)
    assert start["_meta"]["terminal_info"]["terminal_id"] == start["toolCallId"]
    data = "".join(u.get("_meta", {}).get("terminal_output", {}).get("data", "") for u in updates)
    assert "hello terminal" in data
    assert updates[-1]["_meta"]["terminal_exit"]["exit_code"] == 0


def test_stdout_stays_clean_when_the_kernel_writes_to_its_fd_1(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    here.model.push(
        tool_call("import os\nos.write(1, b'raw kernel fd1 write\\n')\nprint('ok')"), text("done")
    )
    assert prompt(client, sid, "write to fd 1")[0] == "end_turn"
    assert client.garbage == []


def test_ask_mode_requests_permission_before_the_cell_runs(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    here.model.push(tool_call("print('allowed cell ran')"), text("done"))
    result = client.request(
        "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "ask"}
    )
    assert {o["id"]: o["currentValue"] for o in result["configOptions"]}["mode"] == "ask"
    here.wait_for(
        lambda m: m.get("method") == "session/update" and m["params"]["update"].get("currentModeId") == "ask"
    )
    assert prompt(client, sid, "run it")[0] == "end_turn"
    asks = [r for r in here.agent_requests() if r["method"] == "session/request_permission"]
    assert len(asks) == 1
    assert {o["kind"] for o in asks[0]["params"]["options"]} == {"allow_once", "allow_always", "reject_once"}
    start, updates = final_card(client, sid)
    assert asks[0]["params"]["toolCall"]["toolCallId"] == start["toolCallId"]
    assert updates[-1]["status"] == "completed"


def test_allow_always_is_remembered_for_the_session(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    here.model.push(tool_call("print(1)"), tool_call("print(2)"), text("done"))
    client.request("session/set_mode", {"sessionId": sid, "modeId": "ask"})
    client.permission_policy = select("allow_always")
    assert prompt(client, sid, "two cells")[0] == "end_turn"
    asks = [r for r in here.agent_requests() if r["method"] == "session/request_permission"]
    assert len(asks) == 1


def test_rejected_cell_does_not_run(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    here.model.push(tool_call("print('must not run')"), text("ok, I will not"))
    client.request("session/set_mode", {"sessionId": sid, "modeId": "ask"})
    client.permission_policy = select("reject")
    assert prompt(client, sid, "try")[0] == "end_turn"
    everything = str(client.updates(sid))
    assert "must not run\\n" not in everything and "in_progress" not in everything


def test_cancel_while_permission_is_pending_answers_cancelled(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    here.model.push(tool_call("print('never')"))
    client.request("session/set_mode", {"sessionId": sid, "modeId": "ask"})
    client.hold_permissions = True
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    )
    here.wait_for(lambda m: m.get("method") == "session/request_permission")
    client.notify("session/cancel", {"sessionId": sid})
    assert client.result(rid, timeout=10)["stopReason"] == "cancelled"


def test_cancel_mid_cell_interrupts_it_and_answers_cancelled(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    here.model.push(tool_call("import time\nprint('started', flush=True)\ntime.sleep(120)"))
    rid = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "sleep"}]}
    )
    here.wait_for(
        lambda m: (
            m.get("method") == "session/update" and "started" in str(m["params"]["update"].get("content", ""))
        )
    )
    client.notify("session/cancel", {"sessionId": sid})
    assert client.result(rid, timeout=10)["stopReason"] == "cancelled"
    _, updates = final_card(client, sid)
    assert updates[-1]["status"] == "failed"


def test_unknown_session_answers_resource_not_found(served: Serve) -> None:
    here = served()
    client = here.client
    for method, params in (
        ("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
        ("session/set_mode", {"sessionId": "nope", "modeId": "ask"}),
        ("session/set_config_option", {"sessionId": "nope", "configId": "mode", "value": "ask"}),
        ("session/load", {"sessionId": "nope", "cwd": "/tmp", "mcpServers": []}),
        ("session/resume", {"sessionId": "nope", "cwd": "/tmp", "mcpServers": []}),
        ("session/close", {"sessionId": "nope"}),
    ):
        with pytest.raises(RpcError) as info:
            client.request(method, params)
        assert info.value.code == -32002, method


def test_bad_mode_and_config_values_answer_invalid_params(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    with pytest.raises(RpcError) as info:
        client.request("session/set_mode", {"sessionId": sid, "modeId": "reckless"})
    assert info.value.code == -32602
    with pytest.raises(RpcError) as info:
        client.request(
            "session/set_config_option", {"sessionId": sid, "configId": "refine_review", "value": "sometimes"}
        )
    assert info.value.code == -32602
    result = client.request(
        "session/set_config_option", {"sessionId": sid, "configId": "refine_review", "value": "never"}
    )
    assert [o["id"] for o in result["configOptions"]] == [
        "mode",
        "model",
        "refine_review",
        "wait_for_refinement",
    ]
    assert result["configOptions"][2]["currentValue"] == "never"


def test_cancel_also_cancels_a_prompt_queued_behind_the_running_one(served: Serve) -> None:
    here = served()
    client, sid = here.client, here.sid
    here.model.push(
        tool_call("import time\nprint('started', flush=True)\ntime.sleep(120)"), text("must not be used")
    )
    first = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]}
    )
    here.wait_for(
        lambda m: (
            m.get("method") == "session/update" and "started" in str(m["params"]["update"].get("content", ""))
        )
    )
    second = client.start_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]}
    )
    client.notify("session/cancel", {"sessionId": sid})
    assert client.result(first, timeout=10)["stopReason"] == "cancelled"
    assert client.result(second, timeout=10)["stopReason"] == "cancelled"
    assert len(here.requests()) == 1


def test_session_new_with_a_relative_or_missing_cwd_answers_invalid_params(
    served: Serve, tmp_path: Any
) -> None:
    here = served()
    client = here.client
    for cwd in ("relative/dir", str(tmp_path / "does-not-exist")):
        with pytest.raises(RpcError) as info:
            client.request("session/new", {"cwd": cwd, "mcpServers": []})
        assert info.value.code == -32602, cwd
        assert info.value.data["errors"][0]["loc"] == ["cwd"]
