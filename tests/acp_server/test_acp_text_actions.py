"""The text action format over real stdio, against a scripted model that never sends a tool call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_client import AcpClient
from acp_helpers import ClientFactory, final_card, initialize, new_session, prompt, texts

from agent_core.testing.scripted_model import ScriptedModelServer, error, text, tool_call

ANSWER_WITH_CODE = "Let me compute it.\n\n```python\nprint(6 * 7)\n```\n"


def start(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path, **env: str
) -> tuple[AcpClient, str]:
    client = spawn(model.base_url, **env)
    initialize(client)
    sid, _ = new_session(client, str(tmp_path))
    return client, sid


def tool_cards(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if u["sessionUpdate"] == "tool_call"]


def message_text(client: AcpClient, sid: str) -> str:
    return "".join(
        u["content"]["text"] for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"
    )


def test_text_format_runs_the_python_block_as_a_cell_card_and_feeds_its_output_back(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text(ANSWER_WITH_CODE), text("It is 42."))
    client, sid = start(spawn, model, tmp_path, CONTINUAL_ACP_ACTION_FORMAT="text")
    assert prompt(client, sid, "what is six times seven?")[0] == "end_turn"
    start_update, updates = final_card(client, sid)
    assert "print(6 * 7)" in texts(start_update["content"])
    assert updates[-1]["status"] == "completed"
    assert "42" in texts(updates[-1]["content"])
    fed_back = model.requests[1]["messages"][-1]
    assert fed_back["role"] == "user"
    assert "Output of your python block" in fed_back["content"]
    assert "42" in fed_back["content"]


def test_text_format_sends_no_tools_and_tells_the_model_the_convention(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text("Nothing to run."))
    client, sid = start(spawn, model, tmp_path, CONTINUAL_ACP_ACTION_FORMAT="text")
    assert prompt(client, sid, "hello")[0] == "end_turn"
    request = model.requests[0]
    assert "tools" not in request
    assert "first fenced code block whose info string is `python`" in request["messages"][0]["content"]


def test_text_format_shows_blocks_in_other_languages_without_running_them(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text("Run this yourself:\n\n```bash\necho hi\n```\n"))
    client, sid = start(spawn, model, tmp_path, CONTINUAL_ACP_ACTION_FORMAT="text")
    assert prompt(client, sid, "how do I say hi?")[0] == "end_turn"
    assert tool_cards(client, sid) == []
    assert "echo hi" in message_text(client, sid)
    assert len(model.requests) == 1


def test_text_format_runs_a_bash_cell_magic_block(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text("```py\n%%bash\necho from-bash-$((40 + 2))\n```"), text("done"))
    client, sid = start(spawn, model, tmp_path, CONTINUAL_ACP_ACTION_FORMAT="text")
    assert prompt(client, sid, "shell please")[0] == "end_turn"
    _, updates = final_card(client, sid)
    assert "from-bash-42" in texts(updates[-1]["content"])


def test_text_format_turn_ends_at_the_first_answer_without_a_python_block(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(
        text("```python\nx = 1\nprint(x)\n```"),
        text("```python\nprint(x + 1)\n```"),
        text("x ends as 2."),
    )
    client, sid = start(spawn, model, tmp_path, CONTINUAL_ACP_ACTION_FORMAT="text")
    assert prompt(client, sid, "count")[0] == "end_turn"
    assert len(tool_cards(client, sid)) == 2
    assert len(model.requests) == 3
    assert "2" in model.requests[2]["messages"][-1]["content"]


def test_tools_format_never_runs_a_python_block_from_the_answer(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text(ANSWER_WITH_CODE))
    client, sid = start(spawn, model, tmp_path, CONTINUAL_ACP_ACTION_FORMAT="tools")
    assert prompt(client, sid, "show me")[0] == "end_turn"
    assert tool_cards(client, sid) == []
    assert len(model.requests) == 1
    assert model.requests[0]["tools"][0]["function"]["name"] == "ipython"


def test_tools_format_runs_native_tool_calls(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(tool_call("print(40 + 2)", title="sum"), text("42"))
    client, sid = start(spawn, model, tmp_path, CONTINUAL_ACP_ACTION_FORMAT="tools")
    assert prompt(client, sid, "sum")[0] == "end_turn"
    _, updates = final_card(client, sid)
    assert "42" in texts(updates[-1]["content"])


def test_auto_switches_to_text_when_a_model_without_tool_calls_answers_with_a_python_block(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(text(ANSWER_WITH_CODE), text("It is 42."), text("```python\nprint('again')\n```"), text("ok"))
    client, sid = start(spawn, model, tmp_path)
    assert prompt(client, sid, "six times seven")[0] == "end_turn"
    _, updates = final_card(client, sid)
    assert "42" in texts(updates[-1]["content"])
    assert "switched to the text action format" in message_text(client, sid)
    assert "tools" in model.requests[0]
    assert "tools" not in model.requests[1]
    # The choice holds for the next prompt too.
    assert prompt(client, sid, "again")[0] == "end_turn"
    assert "tools" not in model.requests[2]
    assert len(tool_cards(client, sid)) == 2


def test_auto_never_guesses_text_for_a_model_that_made_a_native_tool_call(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(tool_call("print(1)", title="one"), text("done"), text(ANSWER_WITH_CODE))
    client, sid = start(spawn, model, tmp_path)
    assert prompt(client, sid, "one")[0] == "end_turn"
    assert prompt(client, sid, "show me the code")[0] == "end_turn"
    assert len(tool_cards(client, sid)) == 1
    assert len(model.requests) == 3
    assert "tools" in model.requests[2]


def test_auto_retries_without_tools_when_the_endpoint_refuses_them(
    spawn: ClientFactory, model: ScriptedModelServer, tmp_path: Path
) -> None:
    model.push(
        error(400, "registry.ollama.ai/library/gemma:2b does not support tools"),
        text(ANSWER_WITH_CODE),
        text("It is 42."),
    )
    client, sid = start(spawn, model, tmp_path)
    assert prompt(client, sid, "six times seven")[0] == "end_turn"
    assert "tools" in model.requests[0]
    assert "tools" not in model.requests[1]
    _, updates = final_card(client, sid)
    assert "42" in texts(updates[-1]["content"])
    assert "refused tool calls" in message_text(client, sid)
