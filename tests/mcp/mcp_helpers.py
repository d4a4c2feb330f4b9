"""Helpers for the MCP tests (a unique module name: `tests/mcp` has no __init__.py, so that
the directory never shadows the `mcp` SDK package)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core.mcp import McpRegistry, StdioServer, host_ops
from kernel_bridge import KernelSession

SERVER_SCRIPT = str(Path(__file__).parent / "servers" / "tools_server.py")
SECRET_NAME = "MCP_TEST_SECRET"


def stdio_server(name: str = "tools", **env: str) -> StdioServer:
    return StdioServer(name=name, command=sys.executable, args=(SERVER_SCRIPT,), env=tuple(env.items()))


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def group_leader_argv(pid: int) -> list[str]:
    """The command line of the process leading `pid`'s process group."""
    with open(f"/proc/{pid}/stat") as f:
        pgid = int(f.read().rsplit(")", 1)[1].split()[2])
    with open(f"/proc/{pgid}/cmdline", "rb") as f:
        return f.read().decode().split("\0")[:-1]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (its parent has not reaped it yet).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_http(flag: str) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, SERVER_SCRIPT, flag, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )

    def listening() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the HTTP MCP server exited with {proc.returncode}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(listening, 60, "the HTTP MCP server to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


@dataclass
class Asks:
    """A recording stand-in for the editor's permission answer (the ACP tests use the real editor)."""

    answer: str = "allow_once"
    seen: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    async def __call__(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        self.seen.append((server, tool, arguments))
        return self.answer


@dataclass
class Rig:
    registry: McpRegistry
    kernel: KernelSession
    asks: Asks


async def run_cell(kernel: KernelSession, code: str) -> Any:
    """Run a cell that must succeed; returns the CellResult (events are in `run`)."""
    result = await kernel.execute(code, timeout=90).result()
    assert result.status == "ok", f"{result.status}: {result.output}"
    return result


async def cell_error(kernel: KernelSession, code: str) -> tuple[str, str]:
    """Run a cell that must raise; (exception name, message)."""
    result = await kernel.execute(code, timeout=90).result()
    assert result.status == "error", f"the cell did not raise: {result.output}"
    assert result.error is not None
    return result.error.ename, result.error.evalue


@contextlib.asynccontextmanager
async def registry_on(kernel: KernelSession, servers: Any, **options: Any) -> AsyncIterator[McpRegistry]:
    """A registry of `servers` serving this kernel's `mcp.*` ops; stopped (servers and all) afterwards."""
    registry = McpRegistry(cwd=os.getcwd(), **options)
    registry.configure(servers)
    host_ops.register(kernel.host_bridge, registry)
    try:
        yield registry
    finally:
        await registry.aclose()


async def eventually(predicate: Any, timeout: float, what: str) -> None:
    """`wait_until` for async tests: polls against a deadline without blocking the event loop."""
    import anyio

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await anyio.sleep(0.05)


async def read_pid(path: Path, timeout: float = 60) -> int:
    """The pid the test server wrote to `path` (waited for: the server starts in the background)."""
    await eventually(lambda: path.exists() and path.read_text().strip() != "", timeout, f"a pid in {path}")
    return int(path.read_text())
