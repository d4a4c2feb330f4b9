"""ACP `mcpServers` params -> records, Python identifiers, the bounded prompt section, the call timeout."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from agent_core.bus import EventBus
from agent_core.config.loader import ConfigError, load_config
from agent_core.mcp import (
    HttpServer,
    McpConfigError,
    McpRegistry,
    StdioServer,
    attach_mcp,
    parse_servers,
    prompt_section,
)
from agent_core.mcp.config import call_timeout
from agent_core.mcp.connection import ServerConnection
from agent_core.mcp.names import identifier, identifiers


def test_stdio_http_and_sse_entries_become_records() -> None:
    servers = parse_servers(
        [
            {"name": "fs", "command": "/bin/fs", "args": ["-v"], "env": [{"name": "TOKEN", "value": "t"}]},
            {"type": "http", "name": "web", "url": "https://x/mcp", "headers": [{"name": "A", "value": "b"}]},
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []},
        ]
    )
    assert servers == (
        StdioServer("fs", "/bin/fs", ("-v",), (("TOKEN", "t"),)),
        HttpServer("web", "https://x/mcp", (("A", "b"),)),
        HttpServer("old", "http://127.0.0.1:1/sse", (), transport="sse"),
    )


def test_a_records_repr_never_shows_env_or_headers() -> None:
    server = parse_servers([{"name": "fs", "command": "/bin/fs", "env": [{"name": "K", "value": "s3cret"}]}])[
        0
    ]
    assert "s3cret" not in repr(server)


@pytest.mark.parametrize(
    ("entry", "loc"),
    [
        ({"command": "/bin/x"}, ("mcpServers", 0, "name")),
        ({"name": "x", "args": "-v", "command": "/bin/x"}, ("mcpServers", 0, "args")),
        ({"name": "x", "command": "/bin/x", "env": [{"name": "K"}]}, ("mcpServers", 0, "env", 0)),
        ({"type": "http", "name": "x", "url": "ftp://x"}, ("mcpServers", 0, "url")),
        ({"type": "websocket", "name": "x"}, ("mcpServers", 0, "type")),
    ],
)
def test_a_malformed_entry_names_the_bad_field(entry: dict[str, object], loc: tuple[object, ...]) -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_servers([entry])
    assert caught.value.loc == loc


def test_two_servers_with_one_name_are_refused() -> None:
    with pytest.raises(McpConfigError, match="two MCP servers are named 'a'"):
        parse_servers([{"name": "a", "command": "/x"}, {"name": "a", "command": "/y"}])


def test_names_become_unique_identifiers() -> None:
    assert [identifier(n) for n in ("my-server.v2", "2fa", "class", "")] == [
        "my_server_v2",
        "_2fa",
        "class_",
        "_",
    ]
    assert identifiers(["a-b", "a_b", "call"], reserved=["call"]) == {
        "a-b": "a_b",
        "a_b": "a_b_2",
        "call": "call_2",
    }


def test_the_prompt_section_is_bounded_whatever_the_number_of_servers_and_tools() -> None:
    registry = McpRegistry()
    for index in range(200):
        connection = ServerConnection(StdioServer(f"server-{index}", "/bin/x"), cwd=None, on_notice=print)
        connection.state = "ready"
        connection.tools = [{"name": f"tool{i}", "description": "x" * 500} for i in range(300)]
        registry.connections[connection.name] = connection
    text = prompt_section(registry)
    assert len(text) <= 2_000
    assert "- `mcp.server_0` (server-0): 300 tools" in text
    assert "... and 180 more" in text
    assert "await mcp.tools(" in text


def test_no_servers_no_prompt_section() -> None:
    assert prompt_section(McpRegistry()) == ""


def test_mcp_call_timeout_from_config_toml_bounds_the_sessions_calls(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text("mcp_call_timeout = 2.5\n", encoding="utf-8")
    config = load_config({"CONTINUAL_ACP_CONFIG": str(config_file), "HOME": str(tmp_path)})
    session = SimpleNamespace(cwd=tmp_path, agent_config=config, bus=EventBus())
    assert attach_mcp(session, (), start=False).call_timeout == 2.5


def test_a_bad_mcp_call_timeout_is_an_error_naming_it(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text('mcp_call_timeout = "30s"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^setting mcp_call_timeout = '30s' .* a number of seconds > 0"):
        load_config({"CONTINUAL_ACP_CONFIG": str(config_file), "HOME": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"^setting mcp_call_timeout = '30s'"):
        call_timeout({"mcp_call_timeout": "30s"})


def test_the_prompt_says_a_lookup_waits_for_a_server_still_connecting() -> None:
    registry = McpRegistry()
    connection = ServerConnection(StdioServer("slow", "/bin/x"), cwd=None, on_notice=print)
    registry.connections[connection.name] = connection
    assert prompt_section(registry).splitlines()[-1] == (
        "- `mcp.slow` (slow): connecting (a lookup or call waits for it)"
    )
