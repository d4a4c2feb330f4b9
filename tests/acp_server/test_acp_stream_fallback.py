"""Over real stdio: a turn whose stream the endpoint breaks (as llama-cpp-python's server does) still
ends with a stop reason and the answer, and the user is told once per session why answers come whole."""

from __future__ import annotations

from pathlib import Path

from acp_helpers import ClientFactory, final_card, initialize, new_session, prompt, texts

from agent_core.testing.scripted_model import ScriptedModelServer, broken_stream, text, tool_call

TOLD = "Answers without streaming"


def _messages(client: object, sid: str) -> list[dict[str, object]]:
    return [u for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]  # type: ignore[attr-defined]


def test_turns_after_an_empty_stream_end_with_their_answers_and_the_user_is_told_once(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    script = [broken_stream("empty"), text("The first answer."), text("The second answer.")]
    with ScriptedModelServer(script) as model:
        client = spawn(model.base_url)
        initialize(client)
        sid, _ = new_session(client, str(tmp_path))
        assert prompt(client, sid, "first question")[0] == "end_turn"
        assert prompt(client, sid, "second question")[0] == "end_turn"
        streamed = [r.get("stream", False) for r in model.requests]
    shown = "".join(str(u["content"]["text"]) for u in _messages(client, sid))  # type: ignore[index]
    assert "The first answer." in shown and "The second answer." in shown
    assert shown.count(TOLD) == 1
    assert streamed == [True, False, False]


def test_an_interrupted_stream_is_followed_by_the_whole_answer_as_its_own_message(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    script = [broken_stream("interrupted", before="The ans"), text("The answer is 391.")]
    with ScriptedModelServer(script) as model:
        client = spawn(model.base_url)
        initialize(client, session={"notices": {}})
        sid, _ = new_session(client, str(tmp_path))
        assert prompt(client, sid, "what is 17 * 23?")[0] == "end_turn"
    chunks = _messages(client, sid)
    assert [str(c["content"]["text"]).strip() for c in chunks] == ["The ans", "The answer is 391."]  # type: ignore[index]
    assert chunks[0]["messageId"] != chunks[1]["messageId"]
    notices = [u for u in client.updates(sid) if u["sessionUpdate"] == "notice"]
    assert [n["title"] for n in notices] == [TOLD]
    assert "asked for again" in str(notices[0]["description"])


def test_native_tool_calls_continue_on_an_endpoint_that_refuses_null_assistant_content(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    script = [tool_call("print(17 * 23)", "multiply"), text("It is 391.")]
    with ScriptedModelServer(script, refuse_null_content=True) as model:
        client = spawn(model.base_url)
        initialize(client)
        sid, _ = new_session(client, str(tmp_path))
        assert prompt(client, sid, "compute 17 * 23 in a cell")[0] == "end_turn"
        sent = [m["content"] for r in model.requests for m in r["messages"] if m.get("tool_calls")]
    _, updates = final_card(client, sid)
    assert "391" in texts(updates[-1]["content"])
    assert "It is 391." in "".join(str(u["content"]["text"]) for u in _messages(client, sid))  # type: ignore[index]
    # Refused with null (the openai client retries a 500 itself), then sent with empty text.
    assert sent[-1] == "" and len(sent) > 1 and set(sent[:-1]) == {None}


def test_the_text_action_format_runs_its_block_when_the_answer_could_not_be_streamed(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    script = [broken_stream("empty"), text("```python\nprint(6 * 7)\n```"), text("It is 42.")]
    with ScriptedModelServer(script) as model:
        client = spawn(model.base_url, CONTINUAL_ACP_ACTION_FORMAT="text")
        initialize(client)
        sid, _ = new_session(client, str(tmp_path))
        assert prompt(client, sid, "six times seven?")[0] == "end_turn"
        assert "tools" not in model.requests[1]
    _, updates = final_card(client, sid)
    assert updates[-1]["status"] == "completed" and "42" in texts(updates[-1]["content"])
