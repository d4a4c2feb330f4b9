"""A scripted OpenAI-compatible model endpoint on 127.0.0.1.

The tests and `continual-acp demo` talk to this server through the real `openai` client, so the
whole HTTP + SSE + tool-call-delta path runs for real; only the model's "thinking" is replaced by a
script. It is stdlib-only and threaded, so sync code, async code and spawned processes can all use it.

A script is a list of responses, consumed one per `POST /v1/chat/completions`. Responses are plain
JSON-able dicts (so a script can be written to a file for the process mode) built by the helpers in
`script.py`, re-exported here: `text`, `tool_call`, `tool_calls`, `reasoning`, `length_cut`, `refusal`,
`error`, `stall`, `drop`, `broken_stream`, `usage`, `response`.

Run as a process: `python -m agent_core.testing.scripted_model --script FILE.json --port-file PATH`.
"""

from __future__ import annotations

import argparse
import json
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent_core.testing.replies import DROP, HOLD_LIMIT, stream_chunks, whole_completion
from agent_core.testing.script import (
    Response,
    broken_stream,
    drop,
    error,
    length_cut,
    reasoning,
    refusal,
    response,
    stall,
    text,
    tool_call,
    tool_calls,
    usage,
)
from host_base.private_files import write_atomic

__all__ = [
    "Response",
    "ScriptExhausted",
    "ScriptedModelServer",
    "broken_stream",
    "drop",
    "error",
    "length_cut",
    "main",
    "reasoning",
    "refusal",
    "response",
    "stall",
    "text",
    "tool_call",
    "tool_calls",
    "usage",
]

# ---------------------------------------------------------------- the server


class ScriptExhausted(Exception):
    pass


class ScriptedModelServer:
    """Serves `script` (a list of responses) at `base_url`; records every chat request body.

    `refuse_null_content` answers HTTP 500 (as llama-cpp-python's server does) to any request holding
    an assistant message with `content: null`, without consuming the script.
    `refuse_response_format` (the `response_format` types it does not take, e.g. `("json_schema",)`
    as llama-cpp-python's server) answers `refusal_status` with a message naming `response_format`
    to a request asking for one of them, likewise without consuming the script.

    `fallback`, when given, answers requests after the script runs out; otherwise they get a 400
    that says the script is exhausted (a 400 is not retried, so a test fails fast and readably).
    `responder`, when given, answers after the script (before `fallback`) from the request body
    itself: a model whose behaviour depends on what it is sent (the eval's per-task scripts).

    `routes` (marker -> script) serves several conversations at once (a parent and its subagents,
    whose requests interleave): a request whose first user message contains a marker is answered
    from that marker's script (first marker that matches, in the mapping's order); the rest from
    `script`. `requests_for(marker)` lists the bodies a route received.
    """

    def __init__(
        self,
        script: Sequence[Response] = (),
        *,
        models: Sequence[str] = ("scripted-model",),
        fallback: Response | None = None,
        port: int = 0,
        routes: Mapping[str, Sequence[Response]] | None = None,
        refuse_null_content: bool = False,
        refuse_response_format: Sequence[str] = (),
        refusal_status: int = 400,
        responder: Callable[[dict[str, Any]], Response] | None = None,
    ) -> None:
        self.responder = responder
        self._script: list[Response] = [dict(r) for r in script]
        self._routes: dict[str, list[Response]] = {k: [dict(r) for r in v] for k, v in (routes or {}).items()}
        self._route_requests: dict[str, list[dict[str, Any]]] = {k: [] for k in self._routes}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.models = list(models)
        self.fallback = fallback
        # Like llama-cpp-python's server: a request holding an assistant message whose `content` is
        # null (beside its tool calls) gets HTTP 500 with a validation message, consuming nothing.
        self.refuse_null_content = refuse_null_content
        self.refuse_response_format = tuple(refuse_response_format)
        self.refusal_status = refusal_status
        self.requests: list[dict[str, Any]] = []
        # Chat requests refused for having no messages (their headers), which OpenAI answers with 400.
        self.rejected: list[dict[str, Any]] = []
        self.request_times: list[float] = []  # seconds spent serving each chat request
        self.disconnects = 0  # stalled streams whose client hung up (see `wait_for_disconnects`)
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._request_event = threading.Condition(self._lock)
        self._holds: dict[str, threading.Event] = {}  # `{"hold": name}` events wait on these

    # -- lifecycle

    def start(self) -> ScriptedModelServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _QuietHTTPServer(("127.0.0.1", self._port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="scripted-model", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ScriptedModelServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- script

    def push(self, *responses: Response) -> None:
        """Append responses to the script (tests may extend it while a session runs)."""
        with self._lock:
            self._script.extend(dict(r) for r in responses)

    def push_route(self, marker: str, *responses: Response) -> None:
        """Append responses to one route's script (a new marker starts a new route)."""
        with self._lock:
            self._routes.setdefault(marker, []).extend(dict(r) for r in responses)
            self._route_requests.setdefault(marker, [])

    def clear_script(self) -> None:
        """Drop what is left of the script and of every route, and the routes' logs: an endpoint that
        several tests share starts each test with nothing scripted (`requests` keeps every body)."""
        with self._lock:
            self._script.clear()
            self._routes.clear()
            self._route_requests.clear()

    def requests_for(self, marker: str) -> list[dict[str, Any]]:
        """The request bodies the route `marker` answered, in arrival order."""
        with self._lock:
            return list(self._route_requests.get(marker, []))

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def _hold(self, name: str) -> threading.Event:
        with self._lock:
            return self._holds.setdefault(name, threading.Event())

    def release(self, name: str) -> None:
        """Let every reply waiting at (or later reaching) a `{"hold": name}` event go on."""
        self._hold(name).set()

    def _note_disconnect(self) -> None:
        with self._request_event:
            self.disconnects += 1
            self._request_event.notify_all()

    def wait_for_disconnects(self, count: int = 1, timeout: float = 30.0) -> bool:
        """Block until clients have hung up on `count` stalled streams (a cancel closes its stream)."""
        with self._request_event:
            return self._request_event.wait_for(lambda: self.disconnects >= count, timeout=timeout)

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> bool:
        """Block until at least `count` chat requests have arrived (for sync tests)."""
        with self._request_event:
            return self._request_event.wait_for(lambda: len(self.requests) >= count, timeout=timeout)

    def _next(self, body: dict[str, Any]) -> Response:
        with self._lock:
            self.requests.append(body)
            self._request_event.notify_all()
            marker = _route_of(body, self._routes)
            if marker is not None:
                self._route_requests[marker].append(body)
                if self._routes[marker]:
                    return self._routes[marker].pop(0)
                if self.fallback is not None:
                    return dict(self.fallback)
                raise ScriptExhausted(f"scripted model: the script of route {marker!r} is exhausted")
            if self._script:
                return self._script.pop(0)
            if self.responder is not None:
                return self.responder(body)
            if self.fallback is not None:
                return dict(self.fallback)
            raise ScriptExhausted(
                f"scripted model: script exhausted after {len(self.requests) - 1} responses"
            )


def _has_null_assistant_content(body: Mapping[str, Any]) -> bool:
    return any(
        isinstance(m, dict) and m.get("role") == "assistant" and "content" in m and m["content"] is None
        for m in body.get("messages") or ()
    )


def _route_of(body: Mapping[str, Any], routes: Mapping[str, Any]) -> str | None:
    """The first route marker found in the request's first user message (None: the default script)."""
    if not routes:
        return None
    first = next(
        (m for m in body.get("messages") or () if isinstance(m, dict) and m.get("role") == "user"), None
    )
    if first is None:
        return None
    content = first.get("content")
    if isinstance(content, list):
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    text = str(content or "")
    return next((marker for marker in routes if marker in text), None)


class _QuietHTTPServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a cancelled turn, a closed keep-alive connection) is normal here;
        # the stdlib default would print a traceback to stderr for each one.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedModelServer
    protocol_version = "HTTP/1.1"  # keep-alive, like a real endpoint; streams use chunked encoding
    # Small SSE writes must leave at once: with Nagle on, each waits for the peer's delayed ACK (~40 ms).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass  # never print: the server may share a process whose stdout is a protocol stream

    def _send_json(
        self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            models = [
                {"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in self.owner.models
            ]
            self._send_json(200, {"object": "list", "data": models})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(
                400, {"error": {"message": f"invalid JSON body: {exc}", "type": "invalid_request"}}
            )
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            # As OpenAI answers a chat request without messages: a 400, and no script item used up
            # (the script belongs to the chat requests). The headers are kept to say who sent it.
            with self.owner._lock:
                self.owner.rejected.append({"headers": dict(self.headers.items()), "length": length})
            message = "'messages' is a required property"
            self._send_json(400, {"error": {"message": message, "type": "invalid_request_error"}})
            return
        started = time.perf_counter()
        asked = body.get("response_format")
        if isinstance(asked, dict) and asked.get("type") in self.owner.refuse_response_format:
            with self.owner._lock:
                self.owner.requests.append(body)
            message = f"response_format: type {asked.get('type')!r} is not supported by this server"
            self._send_json(
                self.owner.refusal_status,
                {"error": {"message": message, "type": "invalid_request_error"}},
                {"retry-after-ms": "10"},
            )
            return
        if self.owner.refuse_null_content and _has_null_assistant_content(body):
            with self.owner._lock:
                self.owner.requests.append(body)
            message = (
                "1 validation error: {'type': 'string_type', 'loc': ('body', 'messages', 'ChatCompletion"
                "RequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}"
            )
            # A short retry-after keeps the openai client's retries of this 500 quick in tests.
            self._send_json(
                500,
                {"error": {"message": message, "type": "internal_server_error"}},
                {"retry-after-ms": "10"},
            )
            return
        try:
            reply = self.owner._next(body)
        except ScriptExhausted as exc:
            self._send_json(400, {"error": {"message": str(exc), "type": "script_exhausted"}})
            return
        try:
            if reply.get("kind") == "error":
                headers = {}
                if reply.get("retry_after_ms") is not None:
                    headers["retry-after-ms"] = str(reply["retry_after_ms"])
                payload = {
                    "error": {"message": reply["message"], "type": "scripted", "code": reply["status"]}
                }
                self._send_json(int(reply["status"]), payload, headers)
            elif body.get("stream"):
                self._stream(body, reply)
            else:
                self._send_json(200, whole_completion(body, reply, self.owner._stopping, self.owner._hold))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (a cancelled turn): nothing to answer
            if body.get("stream"):
                self.owner._note_disconnect()  # it hung up before the stall was reached: a disconnect too
        finally:
            with self.owner._lock:
                self.owner.request_times.append(time.perf_counter() - started)

    def _stream(self, body: Mapping[str, Any], reply: Response) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in stream_chunks(body, reply, self.owner._stopping):
            if chunk is DROP:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if "comment" in chunk or "done" in chunk:
                line = f": {chunk['comment']}\n\n" if "comment" in chunk else "data: [DONE]\n\n"
                data = line.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                continue
            if "sleep" in chunk or "hold" in chunk:
                until = self.owner._hold(chunk["hold"]) if "hold" in chunk else None
                if self._client_hung_up(chunk.get("sleep", HOLD_LIMIT), until):
                    self.close_connection = True
                    self.owner._note_disconnect()
                    return
                continue
            data = f"data: {json.dumps(chunk)}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        done = b"data: [DONE]\n\n"
        self.wfile.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
        self.wfile.flush()

    def _client_hung_up(self, seconds: float, until: threading.Event | None = None) -> bool:
        """Wait up to `seconds` (less if the server stops or `until` is set); True as soon as the
        client closes."""
        deadline = time.monotonic() + seconds
        while not self.owner._stopping.is_set() and not (until is not None and until.is_set()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            readable, _, _ = select.select([self.connection], [], [], min(remaining, 0.05))
            if readable:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return True
                except OSError:
                    return True
                # The client sent something (a pipelined request): keep waiting on the clock only.
                (until or self.owner._stopping).wait(max(0.0, deadline - time.monotonic()))
                return False
        return False


# ---------------------------------------------------------------- process mode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a scripted OpenAI-compatible model on 127.0.0.1.")
    parser.add_argument("--script", required=True, type=Path, help="JSON file: a list of responses")
    parser.add_argument("--port-file", type=Path, help="write the chosen port here once listening")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--requests-file", type=Path, help="on exit, write the recorded request bodies here")
    args = parser.parse_args(argv)
    script = json.loads(args.script.read_text(encoding="utf-8"))
    if not isinstance(script, list):
        parser.error(f"{args.script}: the script must be a JSON list of responses")
    server = ScriptedModelServer(script, port=args.port).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.port_file:
        write_atomic(args.port_file, str(server.port), sync=False)  # readers never see a half-written port
    # stderr, never stdout: a parent may be reading a protocol stream from the same pipes.
    print(f"scripted model listening on {server.base_url}", file=sys.stderr, flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
        if args.requests_file:
            args.requests_file.write_text(json.dumps(server.requests), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
