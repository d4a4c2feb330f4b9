"""Faults: servers that fail to start, crash mid-call, hang; the session and other servers go on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp_helpers import cell_error, eventually, pid_alive, read_pid, registry_on, run_cell, stdio_server

from agent_core.mcp import HttpServer, StdioServer, command_text
from kernel_bridge import KernelSession

pytestmark = pytest.mark.anyio


async def test_a_server_crashing_mid_call_raises_in_the_cell_and_the_next_call_restarts_it(
    bare_kernel: KernelSession,
) -> None:
    async with registry_on(bare_kernel, [stdio_server("tools")], call_timeout=30) as registry:
        name, message = await cell_error(bare_kernel, "await mcp.call('tools', 'crash')")
        assert name == "McpServerError"
        assert message == "MCP server 'tools' exited during tools/call crash; the next call restarts it"
        assert (
            await run_cell(bare_kernel, "print(await mcp.call('tools', 'add', a=1, b=2))")
        ).output.strip() == "3"
        assert any("'tools' stopped working" in n.message for n in registry.notices)


async def test_a_crash_of_one_server_leaves_the_others_running(bare_kernel: KernelSession) -> None:
    async with registry_on(bare_kernel, [stdio_server("doomed"), stdio_server("steady")], call_timeout=30):
        await run_cell(bare_kernel, "await mcp.tools()")
        await cell_error(bare_kernel, "await mcp.call('doomed', 'crash')")
        out = await run_cell(bare_kernel, "print(await mcp.call('steady', 'add', a=3, b=4))")
        assert out.output.strip() == "7"


async def test_a_hanging_tool_times_out_and_the_same_server_keeps_answering(
    bare_kernel: KernelSession,
) -> None:
    async with registry_on(bare_kernel, [stdio_server("tools")], call_timeout=1.5) as registry:
        await run_cell(bare_kernel, "await mcp.tools('tools')")  # connected before the clock matters
        name, message = await cell_error(bare_kernel, "await mcp.call('tools', 'hang')")
        assert name == "McpTimeoutError"
        assert message.startswith("MCP server 'tools' did not answer tools/call hang within 1.5 s")
        assert (
            await run_cell(bare_kernel, "print(await mcp.call('tools', 'add', a=2, b=2))")
        ).output.strip() == "4"
        assert [n.level for n in registry.notices] == ["warning"]


async def test_a_server_that_cannot_start_is_reported_and_the_others_keep_working(
    bare_kernel: KernelSession,
) -> None:
    broken = StdioServer("broken", "/nonexistent/mcp-server")
    async with registry_on(bare_kernel, [broken, stdio_server("tools")], call_timeout=30):
        await run_cell(bare_kernel, "await mcp.tools()")
        out = await run_cell(
            bare_kernel, "print([(s['name'], s['state'], s['error']) for s in mcp.servers()])"
        )
        assert out.output.strip() == (
            "[('broken', 'failed', \"command '/nonexistent/mcp-server' does not exist or is not executable\"), "
            "('tools', 'ready', None)]"
        )
        name, message = await cell_error(bare_kernel, "await mcp.call('broken', 'anything')")
        assert name == "McpServerError"
        assert "is failed: command '/nonexistent/mcp-server' does not exist" in message
        assert (await run_cell(bare_kernel, "print(await mcp.tools_2.add(a=5, b=5))")).output.strip() == "10"


async def test_a_server_exiting_at_startup_is_reported_with_its_stderr(bare_kernel: KernelSession) -> None:
    script = "import sys; sys.stderr.write('invalid API token\\n'); sys.exit(2)"
    dying = StdioServer("dying", sys.executable, ("-c", script))
    async with registry_on(bare_kernel, [dying], call_timeout=30) as registry:
        name, message = await cell_error(bare_kernel, "await mcp.tools('dying')")
        assert name == "McpServerError"
        assert "(stderr: invalid API token)" in message
        assert registry.notices[0].message.startswith("MCP server 'dying' could not start")


async def test_mcp_command_shows_states_and_restart_starts_a_new_server_process(
    bare_kernel: KernelSession, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    async with registry_on(bare_kernel, [stdio_server("tools", MCP_TEST_PID_FILE=str(pid_file))]) as registry:
        first = await read_pid(pid_file)
        await registry.tools("tools")
        assert (await command_text(registry, "")).splitlines()[:2] == [
            "MCP servers:",
            "- `tools` (stdio): ready, 11 tools",
        ]
        pid_file.write_text("")
        assert await command_text(registry, "restart tools") == "Restarted `tools`: ready, 11 tools."
        assert await read_pid(pid_file) != first
        await eventually(lambda: not pid_alive(first), 20, "the old server process to exit")


async def test_stopping_the_registry_leaves_no_server_process(
    bare_kernel: KernelSession, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    async with registry_on(bare_kernel, [stdio_server("tools", MCP_TEST_PID_FILE=str(pid_file))]):
        pid = await read_pid(pid_file)
        assert pid_alive(pid)
    await eventually(lambda: not pid_alive(pid), 20, "the MCP server to exit after the registry closed")


async def test_sse_servers_are_reachable(bare_kernel: KernelSession, sse_url: str) -> None:
    async with registry_on(bare_kernel, [HttpServer("old-web", sse_url, transport="sse")], call_timeout=30):
        assert (
            await run_cell(bare_kernel, "print(await mcp.old_web.add(a=20, b=22))")
        ).output.strip() == "42"


GARBAGE = str(Path(__file__).parent / "servers" / "garbage_server.py")


async def test_a_malformed_result_raises_a_clear_tool_error_and_the_server_stays_usable(
    bare_kernel: KernelSession,
) -> None:
    garbage = StdioServer("garbage", sys.executable, (GARBAGE,))
    async with registry_on(bare_kernel, [garbage], call_timeout=5):
        name, message = await cell_error(bare_kernel, "await mcp.call('garbage', 'broken')")
        assert name == "McpToolError"
        assert message == (
            "garbage: the server's answer is not a valid MCP result (content: Input should be a valid list; "
            "isError: Input should be a valid boolean, unable to interpret input)"
        )
        out = await run_cell(bare_kernel, "print([s['state'] for s in mcp.servers()])")
        assert out.output.strip() == "['ready']"


async def test_a_non_json_answer_times_out_with_an_error_saying_what_the_server_sent(
    bare_kernel: KernelSession,
) -> None:
    garbage = StdioServer("garbage", sys.executable, (GARBAGE,))
    async with registry_on(bare_kernel, [garbage], call_timeout=2):  # the timeout is the wait: short
        name, message = await cell_error(bare_kernel, "await mcp.call('garbage', 'noise')")
        assert name == "McpTimeoutError"
        assert message.startswith("MCP server 'garbage' did not answer tools/call noise within 2 s; ")
        assert "it sent output that is not JSON-RPC" in message


async def test_a_tool_added_by_the_server_is_found_after_its_list_changed_notification(
    bare_kernel: KernelSession,
) -> None:
    async with registry_on(bare_kernel, [stdio_server("tools")], call_timeout=30):
        await run_cell(bare_kernel, "await mcp.call('tools', 'grow')")
        out = await run_cell(bare_kernel, "print(await mcp.tools_2.extra(word='new'))")
        assert out.output.strip() == "NEW"
