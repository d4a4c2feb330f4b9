"""ACP v1 notices and compaction updates, each only to a client that advertised it (real stdio)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, initialize, new_session, prompt, run_command

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call, usage

NOTICES = {"notices": {}}
COMPACTION = {"compaction": {}}
SUMMARY = "The user greeted three times."


def start(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path, **caps: Any
) -> tuple[AcpClient, str]:
    client = spawn(model.base_url, CONTINUAL_ACP_ACTION_FORMAT="auto")
    initialize(client, **caps)
    sid, _ = new_session(client, str(tmp_path))
    return client, sid


def updates_of(client: AcpClient, sid: str, kind: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if u["sessionUpdate"] == kind]


def message_text(client: AcpClient, sid: str) -> str:
    return "".join(u["content"]["text"] for u in updates_of(client, sid, "agent_message_chunk"))


def kill_the_kernel(client: AcpClient, model: ScriptedModelServer, sid: str) -> None:
    model.push(tool_call("import os; os._exit(1)", title="die"), text("It died."))
    assert prompt(client, sid, "crash it", timeout=120)[0] == "end_turn"


def test_a_client_with_notices_is_told_when_the_kernel_was_replaced(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client, sid = start(spawn, model, tmp_path, session=NOTICES)
    kill_the_kernel(client, model, sid)
    [notice] = updates_of(client, sid, "notice")
    assert notice["severity"] == "warning"
    assert notice["title"] == "The kernel died and was replaced"


def test_a_client_without_notices_gets_no_notice_and_no_extra_message_for_a_replaced_kernel(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client, sid = start(spawn, model, tmp_path)
    kill_the_kernel(client, model, sid)
    assert updates_of(client, sid, "notice") == []
    assert "replaced" not in message_text(client, sid)


def test_a_notice_with_a_fallback_is_an_agent_message_for_a_client_without_notices(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text("```python\nprint(1)\n```"), text("done"))
    client, sid = start(spawn, model, tmp_path)
    assert prompt(client, sid, "go")[0] == "end_turn"
    assert updates_of(client, sid, "notice") == []
    assert "Text action format: This model answered with a python block" in message_text(client, sid)


def test_a_notice_with_a_fallback_is_a_notice_and_not_a_message_for_a_client_with_notices(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text("```python\nprint(1)\n```"), text("done"))
    client, sid = start(spawn, model, tmp_path, session=NOTICES)
    assert prompt(client, sid, "go")[0] == "end_turn"
    [notice] = updates_of(client, sid, "notice")
    assert notice["title"] == "Text action format" and notice["severity"] == "info"
    assert "This model answered with a python block" not in message_text(client, sid)


def compact_after_three_turns(client: AcpClient, model: ScriptedModelServer, sid: str) -> str:
    for n in range(3):
        model.push(text(f"Hello {n}."))
        assert prompt(client, sid, f"hi {n}")[0] == "end_turn"
    model.push(text(SUMMARY))
    return run_command(client, sid, "/compact")


def test_compact_sends_compaction_updates_to_a_client_that_advertised_them(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client, sid = start(spawn, model, tmp_path, session=COMPACTION)
    compact_after_three_turns(client, model, sid)
    shown = [
        u
        for u in client.updates(sid)
        if u["sessionUpdate"] in ("compaction_update", "compaction_summary_chunk")
    ]
    assert [u["sessionUpdate"] for u in shown] == [
        "compaction_update",
        "compaction_summary_chunk",
        "compaction_update",
    ]
    assert [u.get("status") for u in shown] == ["in_progress", None, "completed"]
    assert len({u["compactionId"] for u in shown}) == 1
    assert SUMMARY in shown[1]["content"]["text"]


def test_compact_sends_no_compaction_updates_to_a_client_that_did_not_advertise_them(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    client, sid = start(spawn, model, tmp_path)
    reply = compact_after_three_turns(client, model, sid)
    assert updates_of(client, sid, "compaction_update") == []
    assert updates_of(client, sid, "compaction_summary_chunk") == []
    assert reply.startswith("Context compacted.")


def test_an_automatic_compaction_inside_a_turn_is_shown_to_a_client_with_compaction(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    full = usage(prompt_tokens=900, completion_tokens=10)
    model.push(text("Hello 0.", usage=full), text("Hello 1.", usage=full), text(SUMMARY), text("Hello 2."))
    # No automatic harness review: after the compaction it would race the turn for the next reply.
    config = tmp_path / "config.toml"
    config.write_text("auto_refine_every = 0\n")
    client = spawn(model.base_url, CONTINUAL_ACP_CONTEXT_WINDOW="1000", CONTINUAL_ACP_CONFIG=str(config))
    initialize(client, session=COMPACTION)
    sid, _ = new_session(client, str(tmp_path))
    for n in range(3):
        assert prompt(client, sid, f"hi {n}")[0] == "end_turn"
    updates = client.updates(sid)
    kinds = [u["sessionUpdate"] for u in updates]
    first = kinds.index("compaction_update")
    shown = [k for k in kinds if k.startswith("compaction")]
    assert shown == ["compaction_update", "compaction_summary_chunk", "compaction_update"]
    after = "".join(
        u["content"]["text"] for u in updates[first:] if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert after.startswith("Hello 2.")  # the answer comes after the compaction
