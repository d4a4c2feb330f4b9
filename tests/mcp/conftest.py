"""Fixtures for the MCP tests: real MCP servers (SDK server side), real kernels, a real registry."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from mcp_helpers import SECRET_NAME, Asks, Rig, serve_http, stdio_server

from agent_core.mcp import HttpServer, McpRegistry, host_ops
from kernel_bridge import KernelPool, KernelSession
from skills.loader import setup_code


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"  # kernel_bridge is asyncio (zmq.asyncio)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """A real streamable-HTTP MCP server on 127.0.0.1 (random port); the endpoint URL."""
    for base in serve_http("--http"):
        yield base + "/mcp"


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    """The same server over SSE; the SSE endpoint URL."""
    for base in serve_http("--sse"):
        yield base + "/sse"


@pytest.fixture(scope="module")
async def rig(http_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Rig]:
    """A real kernel with the skills loaded and `mcp.*` served by a registry of a stdio and an HTTP server."""
    base = tmp_path_factory.mktemp("mcp-kernel")
    asks = Asks()
    registry = McpRegistry(cwd=str(base), call_timeout=20, ask_permission=asks)
    registry.configure(
        [stdio_server("tools", **{SECRET_NAME: "for-the-server-only"}), HttpServer("web-tools", http_url)]
    )
    pool = KernelPool(0)
    await pool.start()
    kernel = await pool.acquire(cwd=base, setup_code=setup_code([]))
    host_ops.register(kernel.host_bridge, registry)
    try:
        assert kernel.setup_error is None, kernel.setup_error
        yield Rig(registry, kernel, asks)
    finally:
        await kernel.shutdown(final_snapshot=False)
        await pool.aclose()
        await registry.aclose()


@pytest.fixture(scope="module")
async def bare_kernel(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelSession]:
    """A real kernel with the skills loaded; each test registers its own registry's ops on it."""
    base = tmp_path_factory.mktemp("mcp-faults")
    pool = KernelPool(0)
    await pool.start()
    kernel = await pool.acquire(cwd=base, setup_code=setup_code([]))
    try:
        assert kernel.setup_error is None, kernel.setup_error
        yield kernel
    finally:
        await kernel.shutdown(final_snapshot=False)
        await pool.aclose()
