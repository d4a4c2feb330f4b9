"""Tools their server marks destructive ask before they run (the ACP test goes through the real editor)."""

from __future__ import annotations

import pytest
from mcp_helpers import Asks, cell_error, registry_on, run_cell, stdio_server

from kernel_bridge import KernelSession

pytestmark = pytest.mark.anyio


async def test_a_destructive_tool_asks_with_its_name_and_arguments(bare_kernel: KernelSession) -> None:
    asks = Asks("allow_once")
    async with registry_on(bare_kernel, [stdio_server("tools")], ask_permission=asks):
        out = await run_cell(bare_kernel, "print(await mcp.call('tools', 'delete-file', path='/tmp/x'))")
        assert out.output.strip() == "deleted /tmp/x"
        assert asks.seen == [("tools", "delete-file", {"path": "/tmp/x"})]


async def test_a_denied_destructive_tool_raises_in_the_cell_and_does_not_run(
    bare_kernel: KernelSession,
) -> None:
    asks = Asks("reject")
    async with registry_on(bare_kernel, [stdio_server("tools")], ask_permission=asks):
        name, message = await cell_error(bare_kernel, "await mcp.tools_2.delete_file(path='/tmp/x')")
        assert name == "McpPermissionDenied"
        assert message == "the user did not allow tools.delete-file (marked destructive by its server) to run"


async def test_allow_always_is_remembered_for_that_tool(bare_kernel: KernelSession) -> None:
    asks = Asks("allow_always")
    async with registry_on(bare_kernel, [stdio_server("tools")], ask_permission=asks):
        code = "for p in ('a', 'b'):\n    print(await mcp.call('tools', 'delete-file', path=p))"
        assert (await run_cell(bare_kernel, code)).output.split("\n")[:2] == ["deleted a", "deleted b"]
        assert len(asks.seen) == 1


async def test_a_tool_not_marked_destructive_never_asks(bare_kernel: KernelSession) -> None:
    asks = Asks("reject")
    async with registry_on(bare_kernel, [stdio_server("tools")], ask_permission=asks):
        assert (
            await run_cell(bare_kernel, "print(await mcp.call('tools', 'add', a=1, b=1))")
        ).output.strip() == "2"
        assert asks.seen == []
