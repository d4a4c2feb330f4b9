"""ModelClient against the scripted endpoint through the real openai client."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from agent_core.config.loader import AgentConfig
from agent_core.errors import ModelError
from agent_core.model import ModelClient
from agent_core.model_events import ModelDone, ReasoningDelta, TextDelta, parse_usage
from agent_core.testing import (
    ScriptedModelServer,
    error,
    length_cut,
    reasoning,
    refusal,
    text,
    tool_call,
    tool_calls,
    usage,
)

pytestmark = pytest.mark.anyio


def _client(base_url: str, **kw: object) -> ModelClient:
    config = AgentConfig(home=Path("/nonexistent"), model="scripted-model", base_url=base_url, api_key="k")
    config.max_retries = 2
    for key, value in kw.items():
        setattr(config, key, value)
    return ModelClient(config)


async def _events(client: ModelClient) -> list[object]:
    try:
        return [e async for e in client.stream([{"role": "user", "content": "hi"}])]
    finally:
        await client.aclose()


async def _run(server_script: list[dict], **kw: object) -> tuple[list[object], ScriptedModelServer]:
    with ScriptedModelServer(server_script) as server:
        events = await _events(_client(server.base_url, **kw))
    return events, server


async def test_text_deltas_arrive_in_order_and_done_carries_the_whole_text() -> None:
    events, _ = await _run([text("one two three", split=3)])
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 3 and "".join(deltas) == "one two three"
    done = events[-1]
    assert isinstance(done, ModelDone) and done.text == "one two three" and done.finish_reason == "stop"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_reasoning_deltas(field: str) -> None:
    events, _ = await _run([reasoning("weigh options", "answer", split=3, field=field)])
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "weigh options"
    assert isinstance(events[-1], ModelDone) and events[-1].reasoning == "weigh options"


async def test_tool_call_split_over_many_chunks_is_reassembled() -> None:
    code = 'for i in range(3):\n    print(i)  # a loop with "quotes"'
    events, _ = await _run([tool_call(code, "loop", split=40)])
    done = events[-1]
    assert isinstance(done, ModelDone) and done.finish_reason == "tool_calls"
    assert len(done.tool_calls) == 1
    assert done.tool_calls[0].parsed() == {"code": code, "title": "loop"}


async def test_parallel_tool_calls_are_accumulated_by_index() -> None:
    events, _ = await _run([tool_calls([("a = 1", "first"), ("b = 2", "second")], split=4)])
    done = events[-1]
    assert isinstance(done, ModelDone)
    assert [c.parsed()["code"] for c in done.tool_calls] == ["a = 1", "b = 2"]


async def test_length_finish_is_reported_with_the_incomplete_call() -> None:
    events, _ = await _run([length_cut("I will run", tool_code="print('x' * 10)")])
    done = events[-1]
    assert isinstance(done, ModelDone) and done.finish_reason == "length"
    with pytest.raises(ValueError, match="not valid JSON"):
        done.tool_calls[0].parsed()


async def test_content_filter_finish_reason_is_passed_through() -> None:
    events, _ = await _run([refusal()])
    assert isinstance(events[-1], ModelDone) and events[-1].finish_reason == "content_filter"


async def test_usage_reports_cache_reads_apart_from_input() -> None:
    events, _ = await _run([text("x", usage=usage(1000, 20, cached_tokens=800, cache_write_tokens=50))])
    done = events[-1]
    assert isinstance(done, ModelDone) and done.usage is not None
    assert (done.usage.input_tokens, done.usage.cache_read_tokens, done.usage.cache_write_tokens) == (
        200,
        800,
        50,
    )
    assert done.usage.output_tokens == 20


def test_anthropic_style_cache_fields_are_understood() -> None:
    parsed = parse_usage(
        {
            "prompt_tokens": 10,
            "completion_tokens": 1,
            "cache_creation_input_tokens": 7,
            "cache_read_input_tokens": 3,
        }
    )
    assert parsed is not None and (
        parsed.cache_write_tokens,
        parsed.cache_read_tokens,
        parsed.input_tokens,
    ) == (7, 3, 7)


async def test_request_carries_the_ipython_tool_streaming_and_a_configured_output_budget() -> None:
    _, server = await _run([text("x")], max_output_tokens=1234, send_max_tokens=True)
    body = server.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 1234
    assert [t["function"]["name"] for t in body["tools"]] == ["ipython"]
    assert body["tools"][0]["function"]["parameters"]["required"] == ["code"]


async def test_500_then_success_is_retried_transparently() -> None:
    events, server = await _run([error(500), error(503), text("fine")])
    assert len(server.requests) == 3
    assert isinstance(events[-1], ModelDone) and events[-1].text == "fine"


async def test_persistent_5xx_becomes_a_model_error_naming_the_endpoint() -> None:
    with ScriptedModelServer([error(500)] * 3) as server, pytest.raises(ModelError) as info:
        base_url = server.base_url
        await _events(_client(base_url))
    assert base_url in str(info.value) and "HTTP 500" in str(info.value)


async def test_rate_limit_is_retried_then_explained() -> None:
    with ScriptedModelServer([error(429)] * 3) as server, pytest.raises(ModelError, match="rate limiting"):
        await _events(_client(server.base_url))
    assert len(server.requests) == 3


async def test_endpoint_down_says_which_endpoint_and_what_to_check() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(ModelError) as info:
        await _events(_client(base, max_retries=1))
    assert base in str(info.value) and "OPENAI_BASE_URL" in str(info.value)


async def test_bad_key_points_at_openai_api_key() -> None:
    with (
        ScriptedModelServer([error(401, "invalid api key")]) as server,
        pytest.raises(ModelError, match="OPENAI_API_KEY"),
    ):
        await _events(_client(server.base_url))


async def test_unknown_model_points_at_the_model_setting() -> None:
    with (
        ScriptedModelServer([error(404, "model not found")]) as server,
        pytest.raises(ModelError, match="CONTINUAL_ACP_MODEL"),
    ):
        await _events(_client(server.base_url))


async def test_complete_returns_one_tool_less_answer() -> None:
    async def go(server: ScriptedModelServer) -> ModelDone:
        client = _client(server.base_url)
        try:
            return await client.complete([{"role": "user", "content": "summarize"}])
        finally:
            await client.aclose()

    with ScriptedModelServer([text("a summary", split=4)]) as server:
        done = await go(server)
        assert "tools" not in server.requests[0]
    assert done.text == "a summary"


def test_invalid_json_arguments_give_a_readable_error() -> None:
    from agent_core.model_events import ToolCall

    with pytest.raises(ValueError, match="ipython are not valid JSON"):
        ToolCall("c1", "ipython", '{"code": ').parsed()
    assert json.loads('{"code": "1"}') == ToolCall("c", "ipython", '{"code": "1"}').parsed()


async def test_connection_cut_mid_stream_is_a_model_error_not_a_partial_answer() -> None:
    from agent_core.testing import drop

    with ScriptedModelServer([drop(before="partial ans")]) as server, pytest.raises(ModelError) as info:
        base_url = server.base_url
        await _events(_client(base_url))
    assert base_url in str(info.value) and "broke off" in str(info.value)


async def test_without_a_configured_budget_the_servers_own_limit_applies() -> None:
    _, server = await _run([text("x")])
    assert "max_tokens" not in server.requests[0]


def _down_url() -> str:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


async def _error_with(config: AgentConfig) -> str:
    with pytest.raises(ModelError) as info:
        await _events(ModelClient(config))
    return str(info.value)


async def test_an_unreachable_endpoint_names_the_environment_variable_that_set_it(tmp_path: Path) -> None:
    from agent_core.config.loader import load_config

    url = _down_url()
    env = {
        "OPENAI_BASE_URL": url,
        "CONTINUAL_ACP_MODEL": "m",
        "CONTINUAL_ACP_CONFIG": str(tmp_path / "absent.toml"),
        "HOME": str(tmp_path),
    }
    config = load_config(env)
    config.max_retries = 0
    said = await _error_with(config)
    assert "(the URL is OPENAI_BASE_URL in the server's environment)" in said
    assert "Connection error.:" not in said


async def test_an_unreachable_endpoint_names_the_config_file_line_and_setup_when_setup_wrote_it(
    tmp_path: Path,
) -> None:
    from agent_core.config.loader import load_config

    url = _down_url()
    path = tmp_path / "config.toml"
    path.write_text(f'# model settings written by `continual-acp setup`\nmodel = "m"\nbase_url = "{url}"\n')
    config = load_config({"CONTINUAL_ACP_CONFIG": str(path), "HOME": str(tmp_path)})
    config.max_retries = 0
    said = await _error_with(config)
    assert f"(the URL is `base_url` in {path}, line 3, written by `continual-acp setup`)" in said
    assert "OPENAI_BASE_URL" not in said
