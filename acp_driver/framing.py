"""Newline-delimited JSON-RPC framing: bytes in, whole lines out, with a limit on a line's length.

ACP over stdio is one JSON object per line. The decoder is fed whatever the pipe returned (a chunk
may hold half a line or many lines) and hands back complete lines; a line longer than the limit is
dropped up to its newline and reported as a `BadLine`, so one runaway frame cannot exhaust memory
and the lines after it still decode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# Large enough for a session/load replay of a long transcript, small enough to bound a runaway line.
LINE_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True)
class BadLine:
    """A line that is not one JSON-RPC object: over the limit, not JSON, not an object, or cut off
    by the end of the stream (no newline). `raw` is the line (its head when over the limit)."""

    raw: bytes
    reason: str


def encode(message: dict[str, Any]) -> bytes:
    """One message as one line."""
    return (json.dumps(message) + "\n").encode()


def parse(line: bytes) -> dict[str, Any] | BadLine:
    """A complete line (with its newline) as a message, or why it is not one."""
    try:
        message = json.loads(line)
    except ValueError as exc:
        return BadLine(line, f"not JSON: {exc}")
    if not isinstance(message, dict):
        return BadLine(line, f"not a JSON object: {type(message).__name__}")
    return message


class LineDecoder:
    """Splits a byte stream into lines; `feed` returns the lines a chunk completed."""

    def __init__(self, limit: int = LINE_LIMIT) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._skipping = False  # inside a line that went over the limit: drop until its newline

    def feed(self, data: bytes) -> list[bytes | BadLine]:
        out: list[bytes | BadLine] = []
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start : end + 1]
            start = len(data) if end < 0 else end + 1
            if self._skipping:
                self._skipping = end < 0
                continue
            self._buffer += piece
            if len(self._buffer) > self.limit:
                out.append(BadLine(bytes(self._buffer[:200]), f"line over the {self.limit}-byte limit"))
                self._buffer.clear()
                self._skipping = end < 0
                continue
            if end >= 0:
                out.append(bytes(self._buffer))
                self._buffer.clear()
        return out

    def end(self) -> list[bytes | BadLine]:
        """The stream ended: a last line without its newline is a `BadLine` (a frame cut off)."""
        if not self._buffer:
            return []
        rest = bytes(self._buffer)
        self._buffer.clear()
        return [BadLine(rest, "cut off by the end of the stream (no newline)")]
