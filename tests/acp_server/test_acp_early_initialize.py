"""The first `initialize` is answered before the server imports anything heavy (early_initialize.py);
anything else in the first line is left for the transport."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from acp_server.harness.methods import install as install_harness_methods
from acp_server.harness.names import HARNESS_METHODS, HARNESS_NOTIFICATIONS
from acp_server.process.early_initialize import EarlyStart, answer_first_initialize
from acp_server.protocol.params import initialize_params
from acp_server.protocol.registry import MethodRegistry, RequestContext
from acp_server.sessions.methods import AcpServer

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientInfo": {"name": "pytest", "version": "1"}},
}


@pytest.fixture
def pipes() -> Iterator[tuple[int, int, int, int]]:
    """(client writes, server reads, server writes, client reads) over two real pipes."""
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    yield client_out, server_in, server_out, client_in
    for fd in (server_in, client_out, client_in, server_out):
        os.close(fd)


def early(pipes: tuple[int, int, int, int], sent: bytes) -> tuple[EarlyStart, bytes]:
    client_out, server_in, server_out, client_in = pipes
    os.write(client_out, sent)
    started = answer_first_initialize(
        server_in, server_out, HARNESS_METHODS, HARNESS_NOTIFICATIONS, wait=10.0
    )
    os.write(server_out, b"END")  # so the read below never blocks on an empty pipe
    answered = os.read(client_in, 1 << 16)
    return started, answered.removesuffix(b"END")


def test_a_first_initialize_is_answered_and_the_bytes_after_it_are_kept_for_the_transport(
    pipes: tuple[int, int, int, int],
) -> None:
    after = b'{"jsonrpc":"2.0","id":2,"method":"session/new"'
    started, answered = early(pipes, json.dumps(INITIALIZE).encode() + b"\n" + after)
    assert started.params == INITIALIZE["params"]
    assert started.unread == after
    reply = json.loads(answered)
    assert reply["id"] == 1 and reply["result"]["protocolVersion"] == 1


@pytest.mark.parametrize(
    "first",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"one"}}\n',
        b'{"jsonrpc":"2.0","id":true,"method":"initialize","params":{"protocolVersion":1}}\n',
        b"not json\n",
    ],
    ids=["another-method", "bad-params", "bad-id", "bad-json"],
)
def test_any_other_first_line_is_left_whole_for_the_transport_and_nothing_is_written(
    pipes: tuple[int, int, int, int], first: bytes
) -> None:
    started, answered = early(pipes, first)
    assert (started.params, started.unread, answered) == (None, first, b"")


@pytest.mark.anyio
async def test_the_early_answer_is_the_answer_of_the_method_table(
    pipes: tuple[int, int, int, int],
) -> None:
    _, answered = early(pipes, json.dumps(INITIALIZE).encode() + b"\n")
    server = AcpServer(MethodRegistry())
    install_harness_methods(server)  # what `serve` installs: the names must match names.py
    ctx = RequestContext(connection=None, method="initialize", request_id=1, is_notification=False)  # type: ignore[arg-type]
    assert json.loads(answered)["result"] == await server.initialize(
        ctx, initialize_params(INITIALIZE["params"])
    )
