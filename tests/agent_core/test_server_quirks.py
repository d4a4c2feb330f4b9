"""Each model-server quirk the model client handles (agent_core/README.md "Server quirks"), reproduced
by the scripted endpoint and read through the real openai client. No vLLM, Ollama, llama.cpp or LM
Studio server can run here (no model downloads): these are their documented behaviours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_core.config.loader import AgentConfig
from agent_core.errors import ModelError
from agent_core.model import ModelClient
from agent_core.model_events import ModelDone
from agent_core.testing import ScriptedModelServer, error, response
from agent_core.turn.text_actions import tools_refused

pytestmark = pytest.mark.anyio


async def _done(script: list[dict]) -> ModelDone:
    with ScriptedModelServer(script) as server:
        config = AgentConfig(
            home=Path("/nonexistent"), model="scripted-model", base_url=server.base_url, api_key="k"
        )
        config.max_retries = 0
        client = ModelClient(config)
        try:
            events = [e async for e in client.stream([{"role": "user", "content": "hi"}])]
        finally:
            await client.aclose()
    done = events[-1]
    assert isinstance(done, ModelDone)
    return done


# What each server answers a request with `tools` it cannot serve (their messages, as documented).
TOOLS_REFUSED = {
    "llama.cpp-without-jinja": "tools param requires --jinja flag",
    "ollama-model-without-tool-template": "registry.ollama.ai/library/gemma:2b does not support tools",
    "vllm-without-auto-tool-choice": (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    ),
}


@pytest.mark.parametrize("message", TOOLS_REFUSED.values(), ids=TOOLS_REFUSED.keys())
async def test_a_servers_400_for_tools_it_cannot_serve_is_read_as_tools_refused(message: str) -> None:
    with pytest.raises(ModelError) as raised:
        await _done([error(400, message)])
    assert tools_refused(raised.value.status, str(raised.value))


async def test_whole_tool_calls_without_ids_get_distinct_generated_ids() -> None:
    # Older Ollama: each call in one chunk, with its name but no id.
    calls = [
        {"tool_call": {"index": i, "name": "ipython", "arguments": json.dumps({"code": code})}}
        for i, code in enumerate(["a = 1", "b = 2"])
    ]
    done = await _done([response(calls, finish_reason="tool_calls")])
    assert [c.parsed()["code"] for c in done.tool_calls] == ["a = 1", "b = 2"]
    ids = [c.id for c in done.tool_calls]
    assert all(ids) and len(set(ids)) == 2


async def test_a_stream_without_usage_although_it_was_asked_for_ends_normally_without_usage() -> None:
    # LM Studio (and others) may ignore `stream_options.include_usage`.
    done = await _done([response([{"content": "hi"}], omit_usage=True)])
    assert (done.text, done.finish_reason, done.usage) == ("hi", "stop", None)
