"""The kernel's `mcp` object against real MCP servers (stdio and streamable HTTP) in a real kernel."""

from __future__ import annotations

import json

import pytest
from mcp_helpers import SECRET_NAME, Rig, cell_error, run_cell

from kernel_bridge.events import Display

pytestmark = pytest.mark.anyio


async def test_tools_lists_every_servers_tools_with_one_line_descriptions(rig: Rig) -> None:
    result = await run_cell(rig.kernel, "import json\nprint(json.dumps(await mcp.tools()))")
    tools = json.loads(result.output)
    assert {(t["server"], t["name"]) for t in tools} >= {("tools", "add"), ("web-tools", "add")}
    add = next(t for t in tools if t["server"] == "tools" and t["name"] == "add")
    assert add == {
        "server": "tools",
        "name": "add",
        "call": "mcp.tools_2.add",  # `tools` is the listing function: the server gets a suffix
        "description": "Add two integers. Second line of the description.",
        "destructive": False,
    }


async def test_tools_filters_by_query_and_adds_input_schemas_on_request(rig: Rig) -> None:
    code = "import json\nprint(json.dumps(await mcp.tools('web-tools', query='integers', schemas=True)))"
    tools = json.loads((await run_cell(rig.kernel, code)).output)
    assert [t["name"] for t in tools] == ["add"]
    assert tools[0]["input_schema"]["properties"].keys() == {"a", "b"}


async def test_servers_reports_name_state_tool_count_and_error(rig: Rig) -> None:
    code = "import json\nawait mcp.tools()\nprint(json.dumps(mcp.servers()))"
    servers = json.loads((await run_cell(rig.kernel, code)).output)
    assert [(s["name"], s["attr"], s["state"], s["error"]) for s in servers] == [
        ("tools", "tools_2", "ready", None),
        ("web-tools", "web_tools", "ready", None),
    ]
    assert servers[0]["tools"] == servers[1]["tools"] == 11


async def test_call_with_arguments_returns_structured_content_as_a_dict(rig: Rig) -> None:
    code = "import json\nprint(json.dumps(await mcp.call('tools', 'describe', name='ab', times=2)))"
    assert json.loads((await run_cell(rig.kernel, code)).output) == {
        "name": "ab",
        "length": 2,
        "repeated": "abab",
    }


async def test_a_wrapped_primitive_comes_back_as_the_value(rig: Rig) -> None:
    out = await run_cell(
        rig.kernel, "r = await mcp.call('tools', 'add', a=2, b=40)\nprint(type(r).__name__, r)"
    )
    assert out.output.strip() == "int 42"


async def test_unstructured_text_comes_back_as_str(rig: Rig) -> None:
    out = await run_cell(rig.kernel, "r = await mcp.call('tools', 'echo', text='héllo')\nprint(repr(r))")
    assert out.output.strip() == "'héllo'"


async def test_attribute_access_calls_tools_by_identifier_and_dir_lists_them(rig: Rig) -> None:
    code = (
        "print(await mcp.web_tools.add(a=1, b=2))\n"
        "print('delete_file' in dir(mcp.tools_2), 'web_tools' in dir(mcp))"
    )
    assert (await run_cell(rig.kernel, code)).output.split() == ["3", "True", "True"]


async def test_an_unknown_server_attribute_raises_attribute_error_naming_the_servers(rig: Rig) -> None:
    name, message = await cell_error(rig.kernel, "mcp.nope")
    assert name == "AttributeError"
    assert "no MCP server 'nope'" in message and "web_tools" in message


async def test_an_image_result_is_displayed_in_the_cell(rig: Rig) -> None:
    run = rig.kernel.execute("await mcp.call('tools', 'picture')", timeout=90)
    displays = [event for event in [e async for e in run] if isinstance(event, Display)]
    assert (await run.result()).status == "ok"
    assert [sorted(d.data) for d in displays] == [["image/png", "text/plain"]]


async def test_a_tool_error_raises_mcp_tool_error_with_the_servers_message(rig: Rig) -> None:
    name, message = await cell_error(rig.kernel, "await mcp.call('tools', 'fail', message='disk is full')")
    assert name == "McpToolError"
    assert message == "tools.fail: Error executing tool fail: disk is full"  # the server's own text


async def test_resources_are_listed_and_read(rig: Rig) -> None:
    code = (
        "print([r['uri'] for r in await mcp.resources('tools')])\n"
        "print(await mcp.read('tools', 'note://readme'))"
    )
    assert (await run_cell(rig.kernel, code)).output.splitlines() == [
        "['note://readme']",
        "hello from a resource",
    ]


async def test_a_call_runs_even_when_the_cell_forgets_await(rig: Rig) -> None:
    code = "pending = mcp.call('tools', 'add', a=1, b=1)\nprint(pending.result(60))"
    assert (await run_cell(rig.kernel, code)).output.strip() == "2"


async def test_calls_can_be_awaited_together(rig: Rig) -> None:
    code = "import asyncio\nprint(await asyncio.gather(*(mcp.call('web-tools', 'add', a=i, b=i) for i in range(4))))"
    assert (await run_cell(rig.kernel, code)).output.strip() == "[0, 2, 4, 6]"


async def test_the_servers_env_reaches_the_server_and_never_the_kernel(rig: Rig) -> None:
    code = (
        f"import os\nprint(os.environ.get({SECRET_NAME!r}, '<unset>'))\n"
        f"print(await mcp.call('tools', 'env_value', name={SECRET_NAME!r}))"
    )
    assert (await run_cell(rig.kernel, code)).output.split() == ["<unset>", "for-the-server-only"]


async def test_prompts_are_listed_and_fetched_with_arguments(rig: Rig) -> None:
    code = (
        "print([p['name'] for p in await mcp.prompts('tools')])\n"
        "messages = await mcp.prompt('tools', 'review', topic='the parser')\n"
        "print(messages[0]['role'], messages[0]['content']['text'])"
    )
    assert (await run_cell(rig.kernel, code)).output.splitlines() == [
        "['review']",
        "user Please review the parser.",
    ]
