"""Script helpers for the scripted model endpoint: each builds one JSON-able response.

A response is `{"kind": "stream", "events": [...], "finish_reason": ..., "usage": ...}` or
`{"kind": "error", "status": ..., ...}`; scripts are lists of them, so they can be written to a file
for `python -m agent_core.testing.scripted_model --script FILE.json`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

Response = dict[str, Any]


def _split(text: str, parts: int) -> list[str]:
    """Cut `text` into `parts` non-empty pieces (fewer when the text is shorter)."""
    parts = max(1, min(parts, len(text) or 1))
    size, extra = divmod(len(text), parts)
    pieces: list[str] = []
    start = 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        pieces.append(text[start:end])
        start = end
    return [p for p in pieces if p] or [""]


def usage(
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    *,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> dict[str, Any]:
    """A usage object as OpenAI-compatible servers send it (cache reads under prompt_tokens_details)."""
    body: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens or cache_write_tokens:
        body["prompt_tokens_details"] = {
            "cached_tokens": cached_tokens,
            "cache_write_tokens": cache_write_tokens,
        }
    return body


def response(
    events: Sequence[Mapping[str, Any]],
    *,
    finish_reason: str | None = "stop",
    usage: Mapping[str, Any] | None = None,
    omit_usage: bool = False,
) -> Response:
    """The general form: a list of delta events, then a finish reason and optional usage.

    An event is one of `{"content": str}`, `{"reasoning_content": str}`, `{"reasoning": str}`,
    `{"tool_call": {"index", "id"?, "name"?, "arguments"}}`, `{"sleep": seconds}` or
    `{"hold": name}` (waits until the test calls `ScriptedModelServer.release(name)`).
    `omit_usage`: no usage chunk even when the request asks for one (servers that ignore
    `stream_options.include_usage`).
    """
    reply: Response = {
        "kind": "stream",
        "events": [dict(e) for e in events],
        "finish_reason": finish_reason,
        "usage": dict(usage) if usage is not None else None,
    }
    if omit_usage:
        reply["omit_usage"] = True
    return reply


def text(content: str, *, split: int = 1, usage: Mapping[str, Any] | None = None) -> Response:
    """A plain answer streamed in `split` content deltas."""
    return response([{"content": p} for p in _split(content, split)], usage=usage)


def _tool_call_events(
    index: int, code: str, title: str | None, split: int, call_id: str | None
) -> list[dict[str, Any]]:
    args: dict[str, Any] = {"code": code}
    if title is not None:
        args["title"] = title
    arguments = json.dumps(args)
    first = {
        "tool_call": {
            "index": index,
            "id": call_id or f"call_{uuid.uuid4().hex[:12]}",
            "name": "ipython",
            "arguments": "",
        }
    }
    return [first] + [{"tool_call": {"index": index, "arguments": p}} for p in _split(arguments, split)]


def tool_call(
    code: str,
    title: str | None = None,
    *,
    split: int = 1,
    text: str | None = None,
    call_id: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> Response:
    """One `ipython` tool call whose JSON arguments arrive in `split` pieces (after optional text)."""
    events: list[dict[str, Any]] = [{"content": text}] if text else []
    events += _tool_call_events(0, code, title, split, call_id)
    return response(events, finish_reason="tool_calls", usage=usage)


def tool_calls(
    calls: Sequence[tuple[str, str | None]], *, split: int = 1, usage: Mapping[str, Any] | None = None
) -> Response:
    """Several `ipython` calls in one response, `(code, title)` each, interleaved by index."""
    per_call = [_tool_call_events(i, code, title, split, None) for i, (code, title) in enumerate(calls)]
    events: list[dict[str, Any]] = []
    longest = max((len(c) for c in per_call), default=0)
    for step in range(longest):
        for call in per_call:
            if step < len(call):
                events.append(call[step])
    return response(events, finish_reason="tool_calls", usage=usage)


def reasoning(
    thought: str,
    answer: str = "",
    *,
    then: str | None = None,
    split: int = 1,
    field: str = "reasoning_content",
    usage: Mapping[str, Any] | None = None,
) -> Response:
    """Reasoning deltas (in `field`: `reasoning_content` or `reasoning`) followed by an answer.

    `then` is another name for `answer` (reads better at call sites: `reasoning("hmm", then="42")`).
    """
    answer = then if then is not None else answer
    events: list[dict[str, Any]] = [{field: p} for p in _split(thought, split)]
    if answer:
        events += [{"content": p} for p in _split(answer, split)]
    return response(events, usage=usage)


def length_cut(
    content: str = "", *, tool_code: str | None = None, split: int = 2, usage: Mapping[str, Any] | None = None
) -> Response:
    """Output stopped by the token limit; with `tool_code`, mid-way through a tool call's arguments."""
    events: list[dict[str, Any]] = [{"content": p} for p in _split(content, split)] if content else []
    if tool_code is not None:
        full = _tool_call_events(0, tool_code, None, split * 2, None)
        events += full[: max(2, len(full) // 2)]  # the id/name and roughly half of the arguments
    return response(events, finish_reason="length", usage=usage)


def refusal(content: str = "", *, usage: Mapping[str, Any] | None = None) -> Response:
    """The provider's content filter stopped the answer."""
    return response([{"content": content}] if content else [], finish_reason="content_filter", usage=usage)


def error(status: int, message: str | None = None, *, retry_after_ms: int | None = 10) -> Response:
    """An HTTP error; `retry_after_ms` keeps the client's own backoff short in tests."""
    return {
        "kind": "error",
        "status": status,
        "message": message or f"scripted error {status}",
        "retry_after_ms": retry_after_ms,
    }


def stall(seconds: float, *, before: str = "", then: str = "") -> Response:
    """Start streaming, go silent for `seconds` (ended early when the server stops), then finish."""
    events: list[dict[str, Any]] = [{"content": before}] if before else []
    events.append({"sleep": seconds})
    if then:
        events.append({"content": then})
    return response(events)


def drop(before: str = "") -> Response:
    """Start streaming, then cut the connection without finishing the HTTP response."""
    events: list[dict[str, Any]] = [{"content": before}] if before else []
    events.append({"drop": True})
    return response(events, finish_reason=None)


def broken_stream(shape: str, *, before: str = "") -> Response:
    """A stream that breaks the way llama-cpp-python's server breaks one (an unstreamed request after
    it gets the next response of the script as a whole `chat.completion`).

    * `"empty"`: what it sends when the request fails after the stream began (a prompt over its
      context, `tool_choice: "auto"` when the model picks a tool): a keep-alive comment, then the
      connection closes - no chunk, no `[DONE]`.
    * `"interrupted"`: what a running stream gets when another request arrives: `before` as content,
      then `[DONE]` without any finish reason, then the connection closes mid-response.
    """
    if shape == "empty":
        return {
            "kind": "stream",
            "bare": True,
            "events": [{"comment": "ping"}, {"drop": True}],
            "finish_reason": None,
        }
    if shape == "interrupted":
        events: list[dict[str, Any]] = [{"content": before}] if before else []
        return {"kind": "stream", "events": [*events, {"done": True}, {"drop": True}], "finish_reason": None}
    raise ValueError(f"broken_stream shape {shape!r} is not 'empty' or 'interrupted'")
