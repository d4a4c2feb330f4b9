"""A recording pass-through in front of the model endpoint: every request and response, to a file.

The server under test is pointed at this proxy instead of the endpoint, so the traces hold exactly
what it sent and got (bodies, the streamed reply as received, usage), whatever the endpoint is: the
scripted model on loopback or a real OpenAI-compatible server. Streams are forwarded as they arrive
(the proxy never buffers a whole reply before the client sees it). Each exchange is one JSON line in
the current log (`set_log`), written when the reply has ended.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any
from urllib.parse import urlsplit

UPSTREAM_TIMEOUT_S = 900.0
HOP_HEADERS = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
}


class CostMeter:
    """Requests and tokens so far, over every proxy of a run (thread-safe: `--jobs` runs several)."""

    def __init__(self, report: Callable[[str], None] | None = None, every: int = 10) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.tokens = 0
        # A slow model's session can take minutes: the cost is also said every `every` requests.
        self._report = report
        self._every = every

    def add(self, tokens: int) -> None:
        with self._lock:
            self.requests += 1
            self.tokens += tokens
            due = self._report is not None and self._every > 0 and self.requests % self._every == 0
        if due and self._report is not None:
            self._report(self.line())

    def line(self) -> str:
        with self._lock:
            return f"cost so far: {self.requests} requests, {self.tokens} tokens"


@dataclass(frozen=True)
class Usage:
    """Tokens of one reply: input excludes cache reads, which are counted apart."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    reported: bool = False


def usage_of(chunks: list[dict[str, Any]]) -> Usage:
    """The usage a reply reported (the last chunk that has one), split into input / output / cache reads."""
    found = next((c["usage"] for c in reversed(chunks) if isinstance(c.get("usage"), dict)), None)
    if found is None:
        return Usage()
    prompt = int(found.get("prompt_tokens") or 0)
    details = found.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    return Usage(max(0, prompt - cached), int(found.get("completion_tokens") or 0), cached, True)


def sse_chunks(raw: str) -> list[dict[str, Any]]:
    """The JSON objects of an SSE body (`data: {...}` lines; `[DONE]` and junk skipped)."""
    chunks: list[dict[str, Any]] = []
    for line in raw.splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if not payload or payload == "[DONE]":
            continue
        try:
            value = json.loads(payload)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            chunks.append(value)
    return chunks


class RecordingProxy:
    """Listens on 127.0.0.1; forwards to `upstream` (a base URL such as http://host:8080/v1)."""

    def __init__(
        self,
        upstream: str,
        *,
        overrides: dict[str, Any] | None = None,
        meter: CostMeter | None = None,
    ) -> None:
        # `overrides` are set in every chat request body forwarded (a run's `seed`, `temperature`):
        # the recorded request is the body as sent, so the traces show them.
        self.overrides = dict(overrides or {})
        self.meter = meter
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the model endpoint must be an http(s) URL; got {upstream!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self._lock = threading.Lock()
        self._log: IO[str] | None = None
        self._tag: dict[str, Any] = {}
        # Exchanges still waiting for their reply: written as unfinished when the log changes, so a
        # request the session cancelled (a stalled model) is in the traces too.
        self._inflight: dict[int, tuple[dict[str, Any], list[bytes]]] = {}
        self._httpd: _QuietServer | None = None
        # Set whenever a client drops its connection between exchanges (nothing was in flight).
        self.dropped = threading.Event()
        self._thread: threading.Thread | None = None

    def set_log(self, log: IO[str] | None, **tag: Any) -> None:
        """Where the next exchanges are written, and fields added to each (task, arm, session).

        Exchanges still in flight are written to the old log first, marked unfinished."""
        with self._lock:
            for entry, received in self._inflight.values():
                self._write(
                    {
                        **entry,
                        "status": None,
                        "ended": time.time(),
                        "error": "no complete reply before the session ended",
                        "response": b"".join(received).decode("utf-8", "replace"),
                        "usage": {
                            "input_tokens": 0,
                            "output_tokens": 0,
                            "cache_read_tokens": 0,
                            "reported": False,
                        },
                    }
                )
            self._inflight.clear()
            self._log = log
            self._tag = dict(tag)

    def _write(self, entry: dict[str, Any]) -> None:
        if self.meter is not None and entry.get("method") == "POST":
            usage = entry.get("usage") or {}
            self.meter.add(int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0))
        if self._log is not None:
            self._log.write(json.dumps({**self._tag, **entry}) + "\n")
            self._log.flush()

    def _begin(self, entry: dict[str, Any], received: list[bytes]) -> None:
        with self._lock:
            self._inflight[id(entry)] = (entry, received)

    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            if self._inflight.pop(id(entry), None) is not None:
                self._write(entry)

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{self._prefix}"

    def start(self) -> RecordingProxy:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.dropped = self.dropped
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def connect(self) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=UPSTREAM_TIMEOUT_S)
        return http.client.HTTPConnection(self._host, self._port, timeout=UPSTREAM_TIMEOUT_S)


class _QuietServer(ThreadingHTTPServer):
    """A client resetting an idle keep-alive connection is no error: the agent's HTTP pool does it
    whenever its server process exits between requests (every eval session ends that way)."""

    dropped: threading.Event

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            self.dropped.set()
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: RecordingProxy
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._forward(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._forward(self.rfile.read(length) if length else b"")

    def _forward(self, body: bytes) -> None:
        started = time.time()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
        entry: dict[str, Any] = {"started": started, "method": self.command, "path": self.path}
        try:
            entry["request"] = json.loads(body) if body else None
        except json.JSONDecodeError:
            entry["request"] = body.decode("utf-8", "replace")
        request = entry["request"]
        if self.owner.overrides and isinstance(request, dict) and "messages" in request:
            request.update(self.owner.overrides)
            body = json.dumps(request).encode()
        received: list[bytes] = []
        self.owner._begin(entry, received)
        conn = self.owner.connect()
        try:
            # The proxy's base URL has the endpoint's path prefix, so the path is forwarded as it is.
            conn.request(self.command, self.path, body=body or None, headers=headers)
            upstream = conn.getresponse()
        except OSError as exc:
            self._answer_error(502, f"the model endpoint could not be reached: {exc}")
            entry.update(status=502, error=str(exc), ended=time.time())
            self.owner._record(entry)
            conn.close()
            return
        finished = False
        try:
            self.send_response(upstream.status)
            for key, value in upstream.getheaders():
                if key.lower() not in HOP_HEADERS:
                    self.send_header(key, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in _pieces(upstream):
                received.append(piece)
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            # Recorded before the last chunk: once the caller has the whole reply, its record exists.
            self._finish(entry, upstream, received)
            finished = True
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as exc:
            entry["error"] = f"the client hung up: {exc}"
            self.close_connection = True
        except (OSError, http.client.HTTPException) as exc:  # the endpoint broke off mid-reply
            # (llama.cpp's server ends a stream it interrupts without the chunked body's end)
            entry["error"] = f"the model endpoint broke off: {type(exc).__name__}: {exc}"
            self.close_connection = True
        finally:
            conn.close()
        if not finished:
            self._finish(entry, upstream, received)

    def _finish(
        self, entry: dict[str, Any], upstream: http.client.HTTPResponse, received: list[bytes]
    ) -> None:
        text = b"".join(received).decode("utf-8", "replace")
        chunks = sse_chunks(text) if "text/event-stream" in (upstream.getheader("Content-Type") or "") else []
        if not chunks:
            try:
                whole = json.loads(text)
                chunks = [whole] if isinstance(whole, dict) else []
            except json.JSONDecodeError:
                pass
        usage = usage_of(chunks)
        entry.update(
            status=upstream.status,
            ended=time.time(),
            response=text,
            usage={
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "reported": usage.reported,
            },
        )
        self.owner._record(entry)

    def _answer_error(self, status: int, message: str) -> None:
        data = json.dumps({"error": {"message": message, "type": "proxy"}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _pieces(response: http.client.HTTPResponse) -> Iterator[bytes]:
    while True:
        piece = response.read1(65536)
        if not piece:
            return
        yield piece
