"""The MCP servers of one session: configure, look up, call (with the destructive-tool check), stop.

All methods run on the agent's event loop; each server's SDK session lives in its own task
(`ServerConnection`), so a slow or dead server never blocks the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from agent_core.bus import EventBus
from agent_core.mcp.config import DEFAULT_CALL_TIMEOUT, ServerConfig
from agent_core.mcp.connection import ServerConnection
from agent_core.mcp.names import identifiers
from agent_core.mcp.records import McpNotice, McpOpError

if TYPE_CHECKING:
    from mcp import ClientSession

log = logging.getLogger(__name__)

# The kernel object's own names: a server (or tool) with one of these names gets a suffixed attribute.
RESERVED = ("servers", "tools", "call", "resources", "read", "prompts", "prompt", "server")
MAX_NOTICES = 50
LIST_WAIT = 10.0  # seconds `tools()` over all servers waits for ones still connecting

# (server, tool, arguments) -> "allow_once" | "allow_always" | "reject" | "cancelled"
AskPermission = Callable[[str, str, dict[str, Any]], Awaitable[str]]


def one_line(text: str | None, limit: int = 120) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def destructive(tool: dict[str, Any]) -> bool:
    annotations = tool.get("annotations") or {}
    return annotations.get("destructiveHint") is True


class McpRegistry:
    def __init__(
        self,
        *,
        cwd: str | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        ask_permission: AskPermission | None = None,
        bus: EventBus | None = None,
    ) -> None:
        self.cwd = cwd
        self.call_timeout = call_timeout
        self.ask_permission = ask_permission
        self.connections: dict[str, ServerConnection] = {}
        self.notices: list[McpNotice] = []
        self.allowed_always: set[tuple[str, str]] = set()
        # Where each `McpNotice` is emitted: the session's bus when attached (agent_core.mcp.attach).
        self.bus = bus if bus is not None else EventBus("MCP")
        self._stopping: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ configuration

    def configure(self, servers: Sequence[ServerConfig], *, start: bool = True) -> None:
        """Make the running set match `servers`: unchanged ones keep running, others (re)start.

        Returns at once; servers connect in the background. `start=False` leaves new servers to
        `start()` (or their first use), so a caller can answer its own request first.
        """
        wanted = {server.name: server for server in servers}
        for name, connection in list(self.connections.items()):
            if wanted.get(name) != connection.config:
                del self.connections[name]
                self._stop_later(connection)
        for name, server in wanted.items():
            if name not in self.connections:
                connection = ServerConnection(server, cwd=self.cwd, on_notice=self._notice)
                self.connections[name] = connection
                if start:
                    connection.start()

    def start(self) -> None:
        """Start every server not started yet (concurrently, in the background)."""
        for connection in self.connections.values():
            if connection.state == "connecting":
                connection.start()

    def _stop_later(self, connection: ServerConnection) -> None:
        task = asyncio.get_running_loop().create_task(connection.stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def aclose(self) -> None:
        """Stop every server (concurrently; each stop is bounded)."""
        connections, self.connections = list(self.connections.values()), {}
        await asyncio.gather(*(c.stop() for c in connections), *self._stopping, return_exceptions=True)

    async def restart(self, name: str) -> ServerConnection:
        connection = self.connection(name)
        await connection.restart()
        return connection

    # ------------------------------------------------------------ notices

    def _notice(self, notice: McpNotice) -> None:
        self.notices.append(notice)
        del self.notices[:-MAX_NOTICES]
        self.bus.emit(notice)

    # ------------------------------------------------------------ lookup

    def attributes(self) -> dict[str, str]:
        """server name -> Python identifier (`mcp.<identifier>`)."""
        return identifiers(self.connections, RESERVED)

    def connection(self, name: str) -> ServerConnection:
        """By name or identifier; `McpOpError("not_found")` listing the servers otherwise."""
        found = self.connections.get(name)
        if found is None:
            by_attr = {attr: n for n, attr in self.attributes().items()}
            found = self.connections.get(by_attr.get(name, ""))
        if found is None:
            known = ", ".join(self.connections) or "none are configured for this session"
            raise McpOpError("not_found", f"no MCP server {name!r} (servers: {known})")
        return found

    @staticmethod
    def tool_attributes(connection: ServerConnection) -> dict[str, str]:
        return identifiers((t.get("name", "") for t in connection.tools), ())

    def find_tool(self, connection: ServerConnection, tool: str) -> dict[str, Any]:
        found = connection.tool(tool)
        if found is None:
            by_attr = {attr: n for n, attr in self.tool_attributes(connection).items()}
            found = connection.tool(by_attr.get(tool, ""))
        if found is None:
            names = ", ".join(t.get("name", "?") for t in connection.tools[:30]) or "none"
            raise McpOpError(
                "not_found", f"MCP server {connection.name!r} has no tool {tool!r} (tools: {names})"
            )
        return found

    # ------------------------------------------------------------ views

    def servers(self) -> list[dict[str, Any]]:
        attrs = self.attributes()
        return [
            {
                "name": c.name,
                "attr": attrs[c.name],
                "transport": c.config.transport,
                "state": c.state,
                "tools": len(c.tools),
                "error": c.error,
            }
            for c in self.connections.values()
        ]

    async def tools(
        self, server: str | None = None, query: str | None = None, schemas: bool = False
    ) -> list[dict[str, Any]]:
        """Tools of one server (or all ready ones; connecting ones are waited for, bounded)."""
        if server is not None:
            targets = [self.connection(server)]
            await targets[0].wait_ready()
        else:
            targets = list(self.connections.values())
            # A listing of everything does not wait long for one slow server: it shows the ready ones.
            await asyncio.gather(*(c.wait_ready(LIST_WAIT) for c in targets), return_exceptions=True)
            targets = [c for c in targets if c.state == "ready"]
        for connection in targets:
            await connection.fresh_tools()
        words = [w for w in (query or "").lower().split() if w]
        attrs = self.attributes()
        found: list[dict[str, Any]] = []
        for connection in targets:
            tool_attrs = self.tool_attributes(connection)
            for tool in connection.tools:
                name = tool.get("name", "")
                haystack = f"{name} {tool.get('title', '')} {tool.get('description', '')}".lower()
                if words and not all(w in haystack for w in words):
                    continue
                entry: dict[str, Any] = {
                    "server": connection.name,
                    "name": name,
                    "call": f"mcp.{attrs[connection.name]}.{tool_attrs.get(name, name)}",
                    "description": one_line(tool.get("description") or tool.get("title")),
                    "destructive": destructive(tool),
                }
                if schemas:
                    entry["input_schema"] = tool.get("inputSchema", {})
                    if tool.get("outputSchema"):
                        entry["output_schema"] = tool["outputSchema"]
                found.append(entry)
        return found

    # ------------------------------------------------------------ operations

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a tool; the wire result plus `value` (structured content, unwrapped) when there is one.

        A destructive tool asks the editor first unless "allow always" was chosen for it.
        """
        connection = self.connection(server)
        await connection.wait_ready()
        await connection.fresh_tools()
        spec = self.find_tool(connection, tool)
        name = spec["name"]
        if destructive(spec) and (connection.name, name) not in self.allowed_always:
            await self._permit(connection.name, name, arguments)

        async def op(client: ClientSession) -> Any:
            from agent_core.mcp.transports import dump

            return dump(await client.call_tool(name, arguments))

        result = await connection.request(f"tools/call {name}", op, self.call_timeout)
        if not isinstance(result, dict):
            raise McpOpError(
                "tool_error", f"{connection.name}.{name}: the server's answer is not a tool result"
            )
        if result.get("isError"):
            texts = [c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"]
            raise McpOpError(
                "tool_error", f"{connection.name}.{name}: {' '.join(texts) or 'the tool failed'}"
            )
        structured = result.get("structuredContent")
        if structured is not None:
            result["value"] = _unwrap(structured, spec.get("outputSchema"))
        return result

    async def _permit(self, server: str, tool: str, arguments: dict[str, Any]) -> None:
        if self.ask_permission is None:
            return
        try:
            decision = await self.ask_permission(server, tool, arguments)
        except Exception as exc:  # the editor failed the request: nobody allowed the tool
            raise McpOpError(
                "denied",
                f"{server}.{tool} is marked destructive and the editor did not answer the ask: {exc}",
            ) from None
        if decision == "allow_always":
            self.allowed_always.add((server, tool))
        elif decision != "allow_once":
            raise McpOpError(
                "denied", f"the user did not allow {server}.{tool} (marked destructive by its server) to run"
            )

    async def resources(self, server: str) -> list[dict[str, Any]]:
        connection = self.connection(server)

        async def op(client: ClientSession) -> Any:
            from agent_core.mcp.transports import dump

            return dump(await client.list_resources()).get("resources", [])

        return list(await connection.request("resources/list", op, self.call_timeout))

    async def read(self, server: str, uri: str) -> list[dict[str, Any]]:
        connection = self.connection(server)

        async def op(client: ClientSession) -> Any:
            from agent_core.mcp.transports import dump

            return dump(await client.read_resource(uri)).get("contents", [])

        return list(await connection.request(f"resources/read {uri}", op, self.call_timeout))

    async def prompts(self, server: str) -> list[dict[str, Any]]:
        connection = self.connection(server)

        async def op(client: ClientSession) -> Any:
            from agent_core.mcp.transports import dump

            return dump(await client.list_prompts()).get("prompts", [])

        return list(await connection.request("prompts/list", op, self.call_timeout))

    async def prompt(self, server: str, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        connection = self.connection(server)

        async def op(client: ClientSession) -> Any:
            from agent_core.mcp.transports import dump

            return dump(await client.get_prompt(name, arguments))

        return dict(await connection.request(f"prompts/get {name}", op, self.call_timeout))


def _unwrap(structured: Any, output_schema: dict[str, Any] | None) -> Any:
    """`{"result": x}` -> x when that is the SDK's wrapping of a non-object return value."""
    if isinstance(structured, dict) and set(structured) == {"result"}:
        props = (output_schema or {}).get("properties")
        if props is None or set(props) == {"result"}:
            return structured["result"]
    return structured
