"""The refinement's model calls ask for their JSON shape as structured output where the endpoint
takes it, in the form it takes, and fall back to the plain request where it takes none."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agent_core.config.loader import AgentConfig
from agent_core.errors import ModelError
from agent_core.model import ModelClient
from agent_core.refinement.completion import ModelClientCompletion, RefineBudgets
from agent_core.refinement.planner import RefinementPlanner
from agent_core.refinement.reply_schemas import REVIEW_SCHEMA, plan_schema
from agent_core.testing import ScriptedModelServer, error, text

pytestmark = pytest.mark.anyio

PLAN = '{"summary": "tests", "edits": [{"action": "create", "kind": "memory", "title": "t", "content": "make check"}]}'
VERDICT = '{"should_refine": true, "rationale": "a lesson", "scope": "local"}'


def _client(base_url: str) -> ModelClient:
    config = AgentConfig(home=Path("/nonexistent"), model="scripted-model", base_url=base_url, api_key="k")
    config.max_retries = 0
    return ModelClient(config)


def _planner(client: ModelClient) -> RefinementPlanner:
    return RefinementPlanner(ModelClientCompletion(client), RefineBudgets(512, 512))


async def _plan(planner: RefinementPlanner, entry_ids: dict[str, list[str]] | None = None) -> list[str]:
    plan = await planner.plan(
        [], overview="(empty)", history=[], scope="local", instructions=None, entry_ids=entry_ids
    )
    return [edit.content or "" for edit in plan.proposal.edits]


async def test_the_planner_and_the_review_gate_send_their_json_schema_and_turns_send_none() -> None:
    with ScriptedModelServer([text(PLAN), text(VERDICT), text("hello")]) as server:
        client = _client(server.base_url)
        try:
            planner = _planner(client)
            assert await _plan(planner) == ["make check"]
            verdict = await planner.review([], trigger_note="every 25 turns")
            turn = [e async for e in client.stream([{"role": "user", "content": "hi"}])]
        finally:
            await client.aclose()
        plan_body, review_body, turn_body = server.requests
    assert verdict.should_refine and turn
    assert plan_body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": plan_schema(), "strict": False},
    }
    assert review_body["response_format"]["json_schema"]["schema"] == REVIEW_SCHEMA
    assert "response_format" not in turn_body
    assert not any(key.startswith("_") for body in server.requests for key in body)


async def test_an_endpoint_refusing_json_schema_gets_json_object_with_the_schema_from_then_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # llama-cpp-python's server: 500 with a validation error naming `response_format`.
    with ScriptedModelServer(
        [text(PLAN), text(PLAN)], refuse_response_format=("json_schema",), refusal_status=500
    ) as server:
        client = _client(server.base_url)
        try:
            planner = _planner(client)
            with caplog.at_level(logging.WARNING, logger="agent_core.model"):
                assert await _plan(planner) == ["make check"]
                assert await _plan(planner) == ["make check"]
        finally:
            await client.aclose()
        kinds = [body["response_format"]["type"] for body in server.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert server.requests[1]["response_format"]["schema"] == plan_schema()
    assert server.requests[1]["messages"] == server.requests[0]["messages"]
    warnings = [r.getMessage() for r in caplog.records if "structured output" in r.getMessage()]
    assert len(warnings) == 1 and "'json_schema'" in warnings[0] and "as 'json_object'" in warnings[0]


async def test_an_endpoint_refusing_every_form_gets_the_plain_request_once_refused() -> None:
    with ScriptedModelServer(
        [text(PLAN), text(PLAN)], refuse_response_format=("json_schema", "json_object")
    ) as server:
        client = _client(server.base_url)
        try:
            planner = _planner(client)
            assert await _plan(planner) == ["make check"]
            assert await _plan(planner) == ["make check"]
        finally:
            await client.aclose()
        kinds = [body.get("response_format", {}).get("type") for body in server.requests]
    assert kinds == ["json_schema", "json_object", None, None]


async def test_a_400_that_is_not_about_response_format_surfaces_and_the_schema_is_still_asked() -> None:
    overflow = error(400, "This model's maximum context length is 4096 tokens")
    with ScriptedModelServer([overflow, text(PLAN)]) as server:
        client = _client(server.base_url)
        try:
            planner = _planner(client)
            with pytest.raises(ModelError) as raised:
                await _plan(planner)
            assert await _plan(planner) == ["make check"]
        finally:
            await client.aclose()
        kinds = [body["response_format"]["type"] for body in server.requests]
    assert raised.value.status == 400 and "maximum context length" in str(raised.value)
    assert kinds == ["json_schema", "json_schema"]


def _shapes(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(action, kind) -> shape; "*" for a shape open to every kind."""
    edits = schema["properties"]["edits"]["items"]["anyOf"]
    return {
        (shape["properties"]["action"]["const"], shape["properties"]["kind"].get("const", "*")): shape
        for shape in edits
    }


async def test_an_update_or_delete_may_only_name_an_existing_entry_of_its_kind_and_none_without_entries() -> (
    None
):
    ids = {"memory": ["test_command", "style"], "skill": ["run_checks"], "prompt": []}
    with ScriptedModelServer([text(PLAN)]) as server:
        client = _client(server.base_url)
        try:
            await _plan(_planner(client), entry_ids=ids)
        finally:
            await client.aclose()
        shapes = _shapes(server.requests[0]["response_format"]["json_schema"]["schema"])
    assert set(shapes) == {
        ("create", "*"), ("update", "memory"), ("delete", "memory"), ("update", "skill"), ("delete", "skill"),
    }  # fmt: skip
    assert shapes[("update", "memory")]["properties"]["id"]["enum"] == ["style", "test_command"]
    assert shapes[("delete", "skill")]["properties"]["id"]["enum"] == ["run_checks"]
    assert shapes[("update", "memory")]["required"] == ["action", "kind", "id", "title", "content"]
    assert shapes[("create", "*")]["required"] == ["action", "kind", "title", "content"]
    assert set(_shapes(plan_schema())) == {("create", "*")}
