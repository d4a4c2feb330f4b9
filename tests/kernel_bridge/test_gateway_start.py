"""The test gateway's start survives its port being taken between choosing and binding it (under the
parallel suite another worker's kernel can bind a port just freed; it answers with a ZMQ greeting)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import gateway_support
import pytest
from gateway_support import start_gateway, stop_gateway

ZMQ_GREETING = b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f"


@pytest.fixture
def zmq_like_port() -> Iterator[int]:
    """A port held by a listener that greets like a ZMQ socket, not like HTTP."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.sendall(ZMQ_GREETING)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = int(listener.getsockname()[1])
    yield port
    stop.set()
    # A close from this thread does not wake an accept() blocked in another: one last connection does.
    socket.create_connection(("127.0.0.1", port), timeout=10).close()
    thread.join(timeout=10)
    assert not thread.is_alive()
    listener.close()


def test_a_gateway_whose_port_was_taken_starts_on_another(
    zmq_like_port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ports = iter([zmq_like_port])
    free = gateway_support._free_port
    monkeypatch.setattr(gateway_support, "_free_port", lambda: next(ports, None) or free())
    gateway = start_gateway(tmp_path)
    try:
        assert not gateway.url.endswith(f":{zmq_like_port}")
        assert gateway.process.poll() is None
    finally:
        stop_gateway(gateway)
