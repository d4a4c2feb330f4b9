"""The Connection in-process over in-memory byte streams: cancellation, timeouts, the agent->client
direction and write serialization, which are awkward to provoke through a real client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from acp_server.protocol.errors import PeerError
from acp_server.protocol.registry import MethodRegistry, RequestContext
from acp_server.protocol.transport import Connection

pytestmark = pytest.mark.anyio


class _Reader:
    def __init__(self, stream: MemoryObjectReceiveStream[bytes]) -> None:
        self._stream = stream

    async def receive(self) -> bytes:
        try:
            return await self._stream.receive()
        except anyio.EndOfStream:
            return b""


class _Writer:
    def __init__(self, stream: MemoryObjectSendStream[bytes]) -> None:
        self._stream = stream

    async def send(self, data: bytes) -> None:
        # Deliver a line in two pieces with a checkpoint between: interleaved writers would show.
        half = len(data) // 2
        await self._stream.send(data[:half])
        await anyio.lowlevel.checkpoint()
        await self._stream.send(data[half:])

    async def aclose(self) -> None:
        await self._stream.aclose()


class Peer:
    """The client side of an in-memory connection."""

    def __init__(self, registry: MethodRegistry) -> None:
        to_server, self._server_in = anyio.create_memory_object_stream[bytes](1000)
        self._server_out, from_server = anyio.create_memory_object_stream[bytes](1000)
        self.connection = Connection(_Reader(self._server_in), _Writer(self._server_out), registry)
        self._to_server = to_server
        self._from_server = from_server
        self._buffer = b""

    async def send(self, message: Any) -> None:
        await self._to_server.send(json.dumps(message).encode() + b"\n")

    async def close_input(self) -> None:
        await self._to_server.aclose()

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            self._buffer += await self._from_server.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        assert isinstance(message, dict)
        return message


@pytest.fixture
async def peer() -> AsyncIterator[tuple[Peer, MethodRegistry, anyio.Event]]:
    registry = MethodRegistry()
    started = anyio.Event()

    @registry.request("slow")
    async def slow(ctx: RequestContext, params: Any) -> Any:
        started.set()
        await anyio.sleep_forever()

    @registry.request("ask_client")
    async def ask_client(ctx: RequestContext, params: Any) -> Any:
        try:
            answer = await ctx.connection.request("client/thing", {"q": 1}, timeout=params.get("timeout"))
        except TimeoutError:
            return {"timedOut": True}
        except PeerError as exc:
            return {"peerError": exc.code}
        return {"answer": answer}

    @registry.request("chatty")
    async def chatty(ctx: RequestContext, params: Any) -> Any:
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(ctx.connection.notify, "note", {"i": i, "pad": "y" * 5000})
        return {}

    side = Peer(registry)
    async with anyio.create_task_group() as tg:
        tg.start_soon(side.connection.serve)
        yield side, registry, started
        tg.cancel_scope.cancel()


async def test_cancel_request_answers_the_cancelled_request_with_32800(
    peer: tuple[Peer, MethodRegistry, anyio.Event],
) -> None:
    side, _, started = peer
    await side.send({"jsonrpc": "2.0", "id": "long-1", "method": "slow", "params": {}})
    with anyio.fail_after(10):
        await started.wait()
        await side.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "long-1"}})
        answer = await side.receive()
    assert answer["id"] == "long-1" and answer["error"]["code"] == -32800


async def test_agent_to_client_requests_resolve_with_the_answer_or_the_error(
    peer: tuple[Peer, MethodRegistry, anyio.Event],
) -> None:
    side, _, _ = peer
    with anyio.fail_after(10):
        await side.send({"jsonrpc": "2.0", "id": 1, "method": "ask_client", "params": {}})
        outgoing = await side.receive()
        assert outgoing["method"] == "client/thing"
        await side.send({"jsonrpc": "2.0", "id": outgoing["id"], "result": {"ok": True}})
        assert (await side.receive())["result"] == {"answer": {"ok": True}}
        await side.send({"jsonrpc": "2.0", "id": 2, "method": "ask_client", "params": {}})
        outgoing = await side.receive()
        await side.send({"jsonrpc": "2.0", "id": outgoing["id"], "error": {"code": -32099, "message": "no"}})
        assert (await side.receive())["result"] == {"peerError": -32099}


async def test_agent_to_client_requests_time_out(peer: tuple[Peer, MethodRegistry, anyio.Event]) -> None:
    side, _, _ = peer
    with anyio.fail_after(10):
        await side.send({"jsonrpc": "2.0", "id": 1, "method": "ask_client", "params": {"timeout": 0.2}})
        assert (await side.receive())["method"] == "client/thing"  # never answered
        assert (await side.receive())["result"] == {"timedOut": True}


async def test_concurrent_writes_never_interleave_within_a_line(
    peer: tuple[Peer, MethodRegistry, anyio.Event],
) -> None:
    side, _, _ = peer
    with anyio.fail_after(10):
        await side.send({"jsonrpc": "2.0", "id": 9, "method": "chatty", "params": {}})
        seen = [await side.receive() for _ in range(51)]  # receive() fails on a torn line
    assert sorted(m["params"]["i"] for m in seen if m.get("method") == "note") == list(range(50))
    assert seen[-1]["id"] == 9


async def test_end_of_input_fails_waiting_client_requests_instead_of_hanging() -> None:
    registry = MethodRegistry()
    outcome: list[str] = []

    @registry.request("ask")
    async def ask(ctx: RequestContext, params: Any) -> Any:
        try:
            await ctx.connection.request("client/thing", {})
        except Exception as exc:
            outcome.append(type(exc).__name__)
        return {}

    side = Peer(registry)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(side.connection.serve)
            await side.send({"jsonrpc": "2.0", "id": 1, "method": "ask", "params": {}})
            assert (await side.receive())["method"] == "client/thing"
            await side.close_input()
    assert outcome == ["ConnectionClosed"]


@pytest.mark.parametrize(
    "replay_from",
    [{"type": "message", "messageId": "m1"}, {"type": "_ours"}, "start", {"kind": "start"}],
    ids=["future-cursor", "extension-cursor", "not-an-object", "no-type"],
)
async def test_a_v2_resume_from_a_cursor_it_cannot_replay_is_refused_not_resumed_without_replay(
    replay_from: object,
) -> None:
    """The v2 draft: an agent that does not support a replay cursor must answer -32602 rather than
    resume without the replay. `{type: "start"}` is v1's session/load; no `replayFrom` is a resume."""
    from acp_server.v2.dialect import V2Dialect

    registry = MethodRegistry()
    served: list[str] = []

    @registry.request("session/resume")
    async def resume(ctx: RequestContext, params: Any) -> Any:
        served.append("resume")
        return {}

    @registry.request("session/load")
    async def load(ctx: RequestContext, params: Any) -> Any:
        served.append("load")
        return {}

    side = Peer(registry)
    side.connection.dialect = V2Dialect(side.connection.notify_as_is)
    base = {"sessionId": "s1", "cwd": "/work"}
    async with anyio.create_task_group() as tg:
        tg.start_soon(side.connection.serve)
        with anyio.fail_after(10):
            await side.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "session/resume",
                    "params": {**base, "replayFrom": replay_from},
                }
            )
            while "id" not in (refused := await side.receive()):
                pass  # a resumed session's state snapshot would come first
            assert refused["id"] == 1 and refused["error"]["code"] == -32602, refused
            assert "replayFrom" in refused["error"]["message"]
            for ident, params in ((2, {**base, "replayFrom": {"type": "start"}}), (3, base)):
                await side.send({"jsonrpc": "2.0", "id": ident, "method": "session/resume", "params": params})
                while "id" not in (answer := await side.receive()):
                    pass
                assert answer == {"jsonrpc": "2.0", "id": ident, "result": {}}
        tg.cancel_scope.cancel()
    assert served == ["load", "resume"]


async def test_an_error_of_a_request_served_under_another_name_names_the_method_the_client_sent() -> None:
    """A v2 `session/resume` from the start is served as `session/load`; its refusal must still say
    `session/resume`, the only name the client knows."""
    from acp_server.protocol.errors import AcpError
    from acp_server.v2.dialect import V2Dialect

    registry = MethodRegistry()

    @registry.request("session/load")
    async def load(ctx: RequestContext, params: Any) -> Any:
        raise AcpError.invalid_params(f"Invalid params for {ctx.method}: cwd: Field required")

    side = Peer(registry)
    side.connection.dialect = V2Dialect(side.connection.notify_as_is)
    async with anyio.create_task_group() as tg:
        tg.start_soon(side.connection.serve)
        with anyio.fail_after(10):
            params = {"sessionId": "s1", "replayFrom": {"type": "start"}}
            await side.send({"jsonrpc": "2.0", "id": 1, "method": "session/resume", "params": params})
            while "id" not in (answer := await side.receive()):
                pass
        tg.cancel_scope.cancel()
    assert answer["error"]["message"] == "Invalid params for session/resume: cwd: Field required"
