"""`/kernel` answers at once (never queued behind the running turn) and says truthfully what happened."""

from __future__ import annotations

import re
from pathlib import Path

import acp_helpers as helpers
from acp_client import AcpClient, Frame
from acp_helpers import send_prompt

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

SKILL_OBJECTS = ("editor", "harness", "refine", "skills", "goal")


def command_reply(client: AcpClient, sid: str, line: str, timeout: float = 30.0) -> tuple[str, Frame]:
    """A command's own reply (a turn may be running and talking meanwhile) and its response frame."""
    return helpers.command_reply(client, sid, line, timeout, commands_only=True)


def wait_for_cell_output(client: AcpClient, sid: str, marker: str) -> None:
    client.wait_for(
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["sessionId"] == sid
            and m["params"]["update"].get("sessionUpdate") == "tool_call_update"
            and marker in str(m["params"]["update"].get("content"))
        ),
        timeout=60,
    )


def test_kernel_interrupt_and_status_answer_while_a_cell_runs(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    model.push(
        tool_call("import time\nprint('now sleeping', flush=True)\ntime.sleep(120)", title="Sleep"),
        text("woke up"),
    )
    turn = send_prompt(client, sid, "sleep a long time")
    wait_for_cell_output(client, sid, "now sleeping")

    status, status_frame = command_reply(client, sid, "/kernel status")
    assert status.startswith("Kernel: busy (running cell "), status
    restart, _ = command_reply(client, sid, "/kernel restart")
    assert restart.startswith("Not restarted: a turn is running"), restart
    interrupt, interrupt_frame = command_reply(client, sid, "/kernel interrupt")
    assert interrupt.startswith("Interrupted the running cell"), interrupt

    turn_frame = client.response_frame(turn, timeout=60)
    assert turn_frame.message["result"]["stopReason"] == "end_turn"
    # Both commands answered before the turn they interrupted or inspected.
    assert status_frame.seq < turn_frame.seq and interrupt_frame.seq < turn_frame.seq
    cell_result = str(model.requests[-1]["messages"][-1])
    assert "(the cell was interrupted)" in cell_result, cell_result


def test_kernel_interrupt_when_idle_says_nothing_was_interrupted(session: tuple[AcpClient, str]) -> None:
    client, sid = session
    reply, _ = command_reply(client, sid, "/kernel interrupt")
    assert reply.startswith("Nothing to interrupt"), reply


def test_kernel_status_reports_cwd_cells_names_and_pid(
    session: tuple[AcpClient, str], model: ScriptedModelServer, tmp_path: Path
) -> None:
    client, sid = session
    model.push(tool_call("answer = 42", title="Define"), text("defined"))
    rid = send_prompt(client, sid, "define answer")
    assert client.result(rid, timeout=60)["stopReason"] == "end_turn"
    reply, _ = command_reply(client, sid, "/kernel status")
    assert reply.startswith("Kernel: idle"), reply
    assert f"cwd: {tmp_path}" in reply
    assert "cells run since this server opened the session: 1" in reply
    assert re.search(r"kernel pid: \d+", reply), reply
    assert "names defined" in reply


def test_kernel_restart_reports_once_and_does_not_list_skill_objects_as_lost(
    session: tuple[AcpClient, str], model: ScriptedModelServer
) -> None:
    client, sid = session
    model.push(tool_call("kept = 1", title="Define"), text("defined"))
    rid = send_prompt(client, sid, "define kept")
    assert client.result(rid, timeout=60)["stopReason"] == "end_turn"
    reply, _ = command_reply(client, sid, "/kernel restart", timeout=120)
    assert reply.lower().count("restarted") == 1, reply
    assert "kept" in reply
    for name in SKILL_OBJECTS:
        assert not re.search(rf"\b{name}\b", reply), f"{name} listed in: {reply}"
