"""Non-blocking byte streams over the two reserved file descriptors.

Pipes, sockets and ttys go through asyncio's pipe transports (no thread hop per read, which keeps a
trivial request round trip in the tens of microseconds); what the event loop's selector cannot watch
falls back to blocking reads and writes in a worker thread: a regular file (stdin redirected from a
file) and character devices such as `/dev/null`, which asyncio accepts as a pipe but epoll refuses
(EPERM) only once the transport registers the fd, in a callback no caller can catch.
"""

from __future__ import annotations

import asyncio
import os
import selectors
from typing import Protocol

import anyio

READ_CHUNK = 1 << 16


class ByteReader(Protocol):
    async def receive(self) -> bytes:
        """Next chunk of bytes; b"" at end of input."""
        ...


class ByteWriter(Protocol):
    async def send(self, data: bytes) -> None: ...

    async def aclose(self) -> None: ...


class _AsyncioReader:
    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def receive(self) -> bytes:
        return await self._reader.read(READ_CHUNK)


class _ThreadReader:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def receive(self) -> bytes:
        return await anyio.to_thread.run_sync(os.read, self._fd, READ_CHUNK, abandon_on_cancel=True)


class _AsyncioWriter:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def aclose(self) -> None:
        self._writer.close()


class _ThreadWriter:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    async def send(self, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._write_all, data)

    async def aclose(self) -> None:
        os.close(self._fd)


class _Prefixed:
    """A reader that first returns bytes already read from its fd (early_initialize.py)."""

    def __init__(self, first: bytes, reader: ByteReader) -> None:
        self._first = first
        self._reader = reader

    async def receive(self) -> bytes:
        if self._first:
            first, self._first = self._first, b""
            return first
        return await self._reader.receive()


def prefixed(first: bytes, reader: ByteReader) -> ByteReader:
    """`reader`, returning `first` before anything it reads (itself when `first` is empty)."""
    return _Prefixed(first, reader) if first else reader


def _pollable(fd: int, events: int) -> bool:
    """Whether a selector of the loop's kind accepts `fd` (asked of a throwaway one, so a refusal is
    an answer here instead of a traceback from inside the loop)."""
    selector = selectors.DefaultSelector()
    try:
        selector.register(fd, events)
    except (OSError, ValueError):
        return False
    finally:
        selector.close()
    return True


async def open_reader(fd: int) -> ByteReader:
    if not _pollable(fd, selectors.EVENT_READ):
        return _ThreadReader(fd)
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader(limit=READ_CHUNK, loop=loop)
    try:
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream, loop=loop),
            os.fdopen(fd, "rb", buffering=0, closefd=False),
        )
    except (ValueError, OSError):
        return _ThreadReader(fd)
    return _AsyncioReader(stream)


async def open_writer(fd: int) -> ByteWriter:
    if not _pollable(fd, selectors.EVENT_WRITE):
        return _ThreadWriter(fd)
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(fd, "wb", buffering=0, closefd=False)
        )
    except (ValueError, OSError):
        return _ThreadWriter(fd)
    return _AsyncioWriter(asyncio.StreamWriter(transport, protocol, None, loop))
