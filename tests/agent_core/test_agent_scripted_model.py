"""The scripted endpoint speaks OpenAI's wire format well enough for the real `openai` client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from agent_core.testing import (
    ScriptedModelServer,
    error,
    length_cut,
    reasoning,
    refusal,
    stall,
    text,
    tool_call,
    tool_calls,
    usage,
)

pytestmark = pytest.mark.anyio


async def _collect(server: ScriptedModelServer, **kwargs: object) -> list[dict]:
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="test", max_retries=kwargs.pop("max_retries", 2)
    ) as client:  # type: ignore[arg-type]
        # Closed even when the request fails: a client left to the garbage collector would close its
        # connections on a later test's event loop.
        stream = await client.chat.completions.create(
            model="scripted-model",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
            **kwargs,  # type: ignore[arg-type]
        )
        return [chunk.model_dump(exclude_none=True) async for chunk in stream]


def _content(chunks: list[dict]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def _finish(chunks: list[dict]) -> str | None:
    reasons = [c["choices"][0].get("finish_reason") for c in chunks if c["choices"]]
    return [r for r in reasons if r][-1] if any(reasons) else None


async def test_text_is_streamed_in_the_requested_number_of_deltas() -> None:
    with ScriptedModelServer([text("hello world", split=3)]) as server:
        chunks = await _collect(server)
    deltas = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(deltas) == 3
    assert _content(chunks) == "hello world"
    assert _finish(chunks) == "stop"


async def test_tool_call_arguments_reassemble_from_many_chunks() -> None:
    with ScriptedModelServer([tool_call("x = 1\nprint(x)", "set x", split=20)]) as server:
        chunks = await _collect(server)
    pieces = [tc for c in chunks if c["choices"] for tc in (c["choices"][0]["delta"].get("tool_calls") or [])]
    assert len(pieces) >= 15
    assert pieces[0]["function"]["name"] == "ipython" and pieces[0]["id"]
    args = json.loads("".join(p["function"].get("arguments", "") for p in pieces))
    assert args == {"code": "x = 1\nprint(x)", "title": "set x"}
    assert _finish(chunks) == "tool_calls"


async def test_parallel_tool_calls_keep_their_indexes() -> None:
    with ScriptedModelServer([tool_calls([("a = 1", None), ("b = 2", "b")], split=3)]) as server:
        chunks = await _collect(server)
    by_index: dict[int, str] = {}
    for c in chunks:
        for tc in (c["choices"][0]["delta"].get("tool_calls") or []) if c["choices"] else []:
            by_index[tc["index"]] = by_index.get(tc["index"], "") + tc["function"].get("arguments", "")
    assert json.loads(by_index[0]) == {"code": "a = 1"}
    assert json.loads(by_index[1]) == {"code": "b = 2", "title": "b"}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_arrive_in_the_named_field(field: str) -> None:
    with ScriptedModelServer([reasoning("think hard", "answer", split=2, field=field)]) as server:
        chunks = await _collect(server)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get(field) or "" for d in deltas) == "think hard"
    assert _content(chunks) == "answer"


async def test_length_cut_ends_with_length_and_leaves_arguments_incomplete() -> None:
    with ScriptedModelServer([length_cut("partial", tool_code="print('a long cell')")]) as server:
        chunks = await _collect(server)
    args = "".join(
        tc["function"].get("arguments", "")
        for c in chunks
        if c["choices"]
        for tc in (c["choices"][0]["delta"].get("tool_calls") or [])
    )
    assert _finish(chunks) == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)


async def test_refusal_finishes_with_content_filter() -> None:
    with ScriptedModelServer([refusal("no")]) as server:
        chunks = await _collect(server)
    assert _finish(chunks) == "content_filter"


async def test_usage_is_sent_as_the_final_chunk_with_cache_details() -> None:
    with ScriptedModelServer(
        [text("hi", usage=usage(100, 5, cached_tokens=80, cache_write_tokens=10))]
    ) as server:
        chunks = await _collect(server)
    final = chunks[-1]
    assert final["choices"] == []
    assert final["usage"]["prompt_tokens"] == 100
    assert final["usage"]["prompt_tokens_details"]["cached_tokens"] == 80


async def test_500_then_success_is_retried_by_the_client_and_both_requests_recorded() -> None:
    with ScriptedModelServer([error(500), text("recovered")]) as server:
        chunks = await _collect(server)
        assert len(server.requests) == 2
    assert _content(chunks) == "recovered"


async def test_exhausted_script_fails_fast_with_a_readable_400() -> None:
    with ScriptedModelServer([]) as server, pytest.raises(openai.BadRequestError, match="script exhausted"):
        await _collect(server)


async def test_requests_are_recorded_with_their_json_bodies() -> None:
    with ScriptedModelServer([text("a")]) as server:
        await _collect(server)
        body = server.requests[0]
    assert body["model"] == "scripted-model"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["stream"] is True


async def test_stall_is_ended_by_a_client_that_gives_up() -> None:
    async def read_until_timeout(server: ScriptedModelServer) -> float:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0, timeout=0.5)
        started = time.perf_counter()
        with pytest.raises(openai.APITimeoutError):
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for _ in stream:
                pass
        await client.close()
        return time.perf_counter() - started

    with ScriptedModelServer([stall(30, before="thinking")]) as server:
        elapsed = await read_until_timeout(server)
        assert server.wait_for_disconnects(1, timeout=10)
    assert elapsed < 10


async def test_non_streamed_request_gets_the_whole_reply_as_one_completion() -> None:
    async def once(server: ScriptedModelServer) -> openai.types.chat.ChatCompletion:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t")
        reply = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        await client.close()
        return reply

    with ScriptedModelServer([tool_call("print(2)", split=4, text="running")]) as server:
        reply = await once(server)
    message = reply.choices[0].message
    assert message.content == "running"
    assert message.tool_calls and json.loads(message.tool_calls[0].function.arguments) == {"code": "print(2)"}


async def test_models_endpoint_lists_the_configured_models() -> None:
    async def models(server: ScriptedModelServer) -> list[str]:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t")
        page = await client.models.list()
        await client.close()
        return [m.id for m in page.data]

    with ScriptedModelServer([], models=["a", "b"]) as server:
        assert (await models(server)) == ["a", "b"]


async def test_runs_as_a_process_and_writes_its_port(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([text("from a process")]), encoding="utf-8")
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_core.testing.scripted_model",
            "--script",
            str(script),
            "--port-file",
            str(port_file),
            "--requests-file",
            str(tmp_path / "requests.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        # The process announces itself on stderr after writing the port file: wait on that line.
        line = proc.stderr.readline().decode()
        assert "listening on" in line, line
        port = int(port_file.read_text())
        assert line.strip().endswith(f":{port}/v1")

        async def ask() -> str:
            client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="t")
            reply = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )
            await client.close()
            return reply.choices[0].message.content or ""

        assert (await ask()) == "from a process"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    assert proc.stdout is not None and proc.stdout.read() == b""
    recorded = json.loads((tmp_path / "requests.json").read_text())
    assert [r["messages"] for r in recorded] == [[{"role": "user", "content": "x"}]]


async def test_a_held_reply_is_finished_once_the_test_releases_it() -> None:
    import anyio

    from agent_core.testing import response

    script = [response([{"content": "before "}, {"hold": "gate"}, {"content": "after"}])]
    with ScriptedModelServer(script) as server:
        chunks: list[dict] = []
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                chunks.extend(await _collect(server))

            tg.start_soon(read)
            assert await anyio.to_thread.run_sync(server.wait_for_requests, 1)
            server.release("gate")
    assert (_content(chunks), _finish(chunks)) == ("before after", "stop")


def test_a_chat_request_without_messages_is_refused_and_uses_up_no_script_item() -> None:
    import urllib.error
    import urllib.request

    with ScriptedModelServer([text("kept for the real request")]) as server:
        request = urllib.request.Request(f"{server.base_url}/chat/completions", data=b"", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 400
        assert "'messages' is a required property" in refused.value.read().decode()
        assert server.requests == [] and len(server.rejected) == 1
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "kept for the real request"
