"""Streams that break the way llama-cpp-python's server breaks them are answered without streaming.

Each shape was seen against a real `python -m llama_cpp.server --chat_format chatml-function-calling`
and is reproduced here by the scripted endpoint (see `broken_stream` and `refuse_null_content`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.config.loader import AgentConfig
from agent_core.errors import ModelError
from agent_core.model import ModelClient
from agent_core.model_events import ModelDone, StreamFallback, TextDelta
from agent_core.testing import ScriptedModelServer, broken_stream, error, text, tool_call

pytestmark = pytest.mark.anyio

HELLO = [{"role": "user", "content": "hi"}]


def _client(base_url: str) -> ModelClient:
    config = AgentConfig(home=Path("/nonexistent"), model="scripted-model", base_url=base_url, api_key="k")
    config.max_retries = 0
    return ModelClient(config)


async def _answer(client: ModelClient, messages: list[dict[str, object]] = HELLO) -> list[object]:
    return [e async for e in client.stream(messages)]


async def test_an_empty_stream_is_asked_again_without_streaming_and_its_answer_arrives() -> None:
    with ScriptedModelServer([broken_stream("empty"), text("the whole answer")]) as server:
        client = _client(server.base_url)
        try:
            events = await _answer(client)
        finally:
            await client.aclose()
        first, second = server.requests
    assert first["stream"] is True and "stream" not in second and "stream_options" not in second
    assert second["messages"] == first["messages"] and second["tools"] == first["tools"]
    fallback = events[0]
    assert isinstance(fallback, StreamFallback) and not fallback.restart
    assert fallback.reason == "its stream broke off: APIConnectionError"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["the whole answer"]
    done = events[-1]
    assert isinstance(done, ModelDone) and done.finish_reason == "stop" and done.text == "the whole answer"


async def test_a_tool_call_the_server_cannot_stream_arrives_whole() -> None:
    # llama-cpp-python: `tool_choice: "auto"` streamed, when the model picks a tool, is an empty stream.
    with ScriptedModelServer([broken_stream("empty"), tool_call("print(17 * 23)", call_id="c1")]) as server:
        client = _client(server.base_url)
        try:
            events = await _answer(client)
        finally:
            await client.aclose()
    done = events[-1]
    assert isinstance(done, ModelDone) and done.finish_reason == "tool_calls"
    assert [(c.id, c.parsed()["code"]) for c in done.tool_calls] == [("c1", "print(17 * 23)")]


async def test_an_interrupted_stream_is_replaced_by_the_whole_answer() -> None:
    # llama-cpp-python ends a running stream with `[DONE]` (no finish reason) when another request arrives.
    script = [broken_stream("interrupted", before="The ans"), text("The answer is 391.")]
    with ScriptedModelServer(script) as server:
        client = _client(server.base_url)
        try:
            events = await _answer(client)
        finally:
            await client.aclose()
    assert isinstance(events[0], TextDelta) and events[0].text == "The ans"
    fallback = events[1]
    assert isinstance(fallback, StreamFallback) and fallback.restart
    done = events[-1]
    assert isinstance(done, ModelDone) and done.text == "The answer is 391."


async def test_after_one_failed_stream_the_model_is_asked_without_streaming() -> None:
    script = [broken_stream("empty"), text("one"), text("two")]
    with ScriptedModelServer(script) as server:
        client = _client(server.base_url)
        try:
            await _answer(client)
            events = await _answer(client)
        finally:
            await client.aclose()
        streamed = [r.get("stream", False) for r in server.requests]
    assert streamed == [True, False, False]
    assert isinstance(events[0], StreamFallback) and not events[0].restart
    assert isinstance(events[-1], ModelDone) and events[-1].text == "two"


async def test_an_empty_stream_over_the_context_surfaces_the_servers_own_400() -> None:
    # Streamed, a prompt over llama.cpp's context is an empty stream; unstreamed it is a readable 400,
    # which the turn recognises as an overflow (and compacts).
    overflow = "This model's maximum context length is 2048 tokens. However, you requested 3160 tokens"
    with ScriptedModelServer([broken_stream("empty"), error(400, overflow)]) as server:
        client = _client(server.base_url)
        try:
            with pytest.raises(ModelError) as failed:
                await _answer(client)
        finally:
            await client.aclose()
    assert failed.value.status == 400
    assert "broke off" in str(failed.value) and "maximum context length is 2048" in str(failed.value)


async def test_an_endpoint_refusing_null_content_beside_tool_calls_gets_empty_text() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "ipython", "arguments": '{"code": "1"}'}}]
    history = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
    ]
    with ScriptedModelServer([text("done"), text("again")], refuse_null_content=True) as server:
        client = _client(server.base_url)
        try:
            first = await _answer(client, history)
            await _answer(client, history)
        finally:
            await client.aclose()
        contents = [r["messages"][1]["content"] for r in server.requests]
    assert isinstance(first[-1], ModelDone) and first[-1].text == "done"
    # One refusal, then empty text: for the retry and for every later request of this model.
    assert contents == [None, "", ""]
