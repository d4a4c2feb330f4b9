"""Every method handler receives its params typed, and the type it annotates is the one they are read into.

In-process (no stdio server): the method table of a real `AcpServer` with the `_harness/*` methods
installed, read through `registry.invoke` exactly as the transport does.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, get_args

import pytest

from acp_server.harness.methods import install
from acp_server.protocol.errors import AcpError
from acp_server.protocol.registry import MethodRegistry, RequestContext, invoke
from acp_server.sessions.methods import AcpServer

pytestmark = pytest.mark.anyio


@pytest.fixture
async def registry() -> MethodRegistry:
    table = MethodRegistry()
    install(AcpServer(table))
    return table


def _params_annotation(handler: Any) -> Any:
    """The handler's params annotation, evaluated (a string under `from __future__ import annotations`)."""
    import acp.schema

    _ctx, params = list(inspect.signature(handler).parameters.values())[:2]
    namespace = {**vars(acp.schema), **vars(sys.modules[handler.__module__])}
    return eval(params.annotation, namespace) if isinstance(params.annotation, str) else params.annotation


async def test_every_schema_validated_handler_annotates_the_model_its_params_are_validated_with(
    registry: MethodRegistry,
) -> None:
    import acp.schema

    checked: dict[str, set[str]] = {}
    for name in registry.names():
        spec = registry.get(name)
        assert spec is not None
        if spec.params_model is None:
            continue
        annotation = _params_annotation(spec.handler)
        if isinstance(spec.params_model, str):
            models = {spec.params_model}
        else:  # a wire union: the chooser's every answer is one of the annotated models
            models = {spec.params_model({}), spec.params_model({"type": "boolean"})}
        accepted = set(get_args(annotation)) or {annotation}
        assert {getattr(acp.schema, m) for m in models} <= accepted, name
        checked[name] = models
    assert checked["session/set_config_option"] == {
        "SetSessionConfigOptionSelectRequest",
        "SetSessionConfigOptionBooleanRequest",
    }
    assert checked["session/prompt"] == {"PromptRequest"}


async def _refusal(registry: MethodRegistry, method: str, params: dict[str, object]) -> tuple[int, str]:
    spec = registry.get(method)
    assert spec is not None
    ctx = RequestContext(connection=None, method=method, request_id=1, is_notification=False)  # type: ignore[arg-type]
    outcome = await invoke(spec, ctx, params)
    assert outcome.error is not None, outcome
    return outcome.error[0], outcome.error[1]


async def test_set_config_option_of_type_boolean_is_validated_as_the_boolean_request(
    registry: MethodRegistry,
) -> None:
    code, message = await _refusal(
        registry,
        "session/set_config_option",
        {"sessionId": "s", "configId": "mode", "type": "boolean", "value": "ask"},
    )
    assert (code, message.startswith("Invalid params for session/set_config_option: value:")) == (
        -32602,
        True,
    )
    assert "boolean" in message


async def test_set_config_option_without_a_type_takes_a_string_value(registry: MethodRegistry) -> None:
    code, message = await _refusal(
        registry, "session/set_config_option", {"sessionId": "s", "configId": "mode", "value": 3}
    )
    assert (code, message) == (
        -32602,
        "Invalid params for session/set_config_option: value: Input should be a valid string",
    )


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("_harness/status", {}, "Invalid params for _harness/status: sessionId: must be a non-empty string"),
        (
            "_harness/show",
            {"sessionId": "s", "refinementId": ""},
            "Invalid params for _harness/show: refinementId: must be a non-empty string",
        ),
        (
            "_harness/state",
            {"sessionId": "s", "scope": "all"},
            "_harness/state: scope must be local, global, project or merged",
        ),
        (
            "_harness/state",
            {"sessionId": "s", "limit": 0},
            "_harness/state: limit must be an integer from 1 to 2000",
        ),
        (
            "_harness/state",
            {"sessionId": "s", "limit": 2001},
            "_harness/state: limit must be an integer from 1 to 2000",
        ),
        (
            "_harness/state",
            {"sessionId": "s", "limit": "10"},
            "_harness/state: limit must be an integer from 1 to 2000",
        ),
        (
            "_harness/state",
            {"sessionId": "s", "cursor": 5},
            "_harness/state: cursor must be the nextCursor of an earlier answer",
        ),
        (
            "_harness/state",
            {"sessionId": "s", "kind": "note"},
            "_harness/state: kind must be one of prompt, memory, skill, subagent",
        ),
        (
            "_harness/history",
            {"sessionId": "s", "limit": True},
            "_harness/history: limit must be a positive integer",
        ),
        (
            "_harness/review",
            {"sessionId": "s", "proposalId": "p", "decision": "maybe"},
            "_harness/review: decision must be apply, reject or reject_forever",
        ),
        (
            "_harness/review",
            {"sessionId": "s", "proposalId": "p", "decision": "apply", "editIds": [1]},
            "_harness/review: editIds must be a list of entry ids",
        ),
        (
            "_harness/why",
            {"sessionId": "s", "entryId": "e", "kind": "note"},
            "_harness/why: kind must be one of prompt, memory, skill, subagent",
        ),
        (
            "_harness/rollback",
            {"sessionId": "s", "refinementId": "r", "force": "yes"},
            "_harness/rollback: force must be a boolean",
        ),
        (
            "_harness/await_quiescence",
            {"sessionId": "s", "timeoutMs": "soon"},
            "_harness/await_quiescence: timeoutMs must be a non-negative number",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and value.startswith("_harness") else "",
)
async def test_harness_params_are_refused_naming_the_field_and_what_it_must_be(
    registry: MethodRegistry, method: str, params: dict[str, object], message: str
) -> None:
    assert await _refusal(registry, method, params) == (-32602, message)


async def test_harness_await_quiescence_caps_its_typed_timeout_at_an_hour() -> None:
    from acp_server.harness.params import AwaitQuiescenceParams, read

    request = read("_harness/await_quiescence", {"sessionId": "s", "timeoutMs": 7_200_000})
    assert isinstance(request, AwaitQuiescenceParams) and request.timeout == 3600.0


async def test_initialize_params_are_read_typed_without_the_wire_models() -> None:
    from acp_server.protocol.params import InitializeParams, read_initialize

    read = await read_initialize({"protocolVersion": 1, "clientInfo": {"name": "zed"}}, "initialize")
    assert read == InitializeParams(1, None, {"name": "zed"})


async def test_new_session_lists_every_bad_field_and_names_the_first() -> None:
    from acp_server.protocol.params import read_new_session

    with pytest.raises(AcpError) as refused:
        await read_new_session({"mcpServers": "none", "additionalDirectories": [1]}, "session/new")
    assert refused.value.message == "Invalid params for session/new: cwd: Field required"
    assert [e["loc"] for e in refused.value.data["errors"]] == [
        ["cwd"],
        ["mcpServers"],
        ["additionalDirectories"],
    ]
