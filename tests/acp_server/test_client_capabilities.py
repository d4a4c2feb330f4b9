"""Which unstable frames a client takes, read from its `initialize` `clientCapabilities` alone."""

from __future__ import annotations

import pytest

from acp_server.protocol.capabilities import ClientCapabilities
from acp_server.protocol.params import InitializeParams


@pytest.mark.parametrize(
    ("capabilities", "takes_usage"),
    [
        ({}, False),
        ({"plan": {}}, True),
        ({"subagents": {}}, True),
        ({"plan": None, "subagents": None}, False),  # null means not advertised
        ({"_meta": {"continual-acp": {"usage": True}}}, True),
        ({"_meta": {"continual-acp": {"usage": "yes"}}}, False),
        ({"_meta": {"usage": True}}, False),  # only our own `_meta` key counts
    ],
)
def test_the_prompt_usage_goes_to_a_client_speaking_the_unstable_schema_or_opting_in(
    capabilities: dict[str, object], takes_usage: bool
) -> None:
    caps = ClientCapabilities.from_initialize(InitializeParams(1, capabilities))
    assert caps.usage is takes_usage
