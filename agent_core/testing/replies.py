"""A scripted reply (testing/script.py's `Response`) as the wire shows it: the SSE frames of a streamed
answer (`stream_chunks`, with the cut, wait and hold markers the handler acts on) or one whole
`chat.completion` (`whole_completion`), with a rough usage when the script gives none.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from agent_core.testing.script import Response, usage


def default_usage(body: Mapping[str, Any], reply: Response) -> dict[str, Any]:
    """A rough count (4 characters a token) so usage reporting has something to report."""
    prompt_chars = len(json.dumps(body.get("messages", [])))
    out_chars = sum(len(str(v)) for e in reply.get("events", []) for k, v in e.items() if k != "sleep")
    return usage(prompt_chars // 4, max(1, out_chars // 4))


DROP: dict[str, Any] = {"drop": True}  # sentinel: cut the connection here
HOLD_LIMIT = 600.0  # seconds a `{"hold": name}` waits at most for `release(name)`


def stream_chunks(
    body: Mapping[str, Any], reply: Response, stopping: threading.Event
) -> Iterator[dict[str, Any]]:
    """The reply as `chat.completion.chunk` frames; `DROP`, `{"sleep": s}`, `{"hold": name}`, SSE
    comments and an early `[DONE]` are the handler's to act on."""
    chunk_id = f"chatcmpl-{uuid.uuid4().hex[:16]}"
    model = str(body.get("model") or "scripted-model")

    def frame(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    if not reply.get("bare"):
        yield frame({"role": "assistant", "content": ""})
    for event in reply.get("events", []):
        if event.get("drop"):
            yield DROP
            return
        if "comment" in event or "done" in event:
            yield dict(event)  # an SSE comment line, or `[DONE]` before the stream really ends
            continue
        if "sleep" in event or "hold" in event:
            # The handler waits (and watches for a hang-up): a time, or until `release(name)`.
            yield {"sleep": float(event["sleep"])} if "sleep" in event else {"hold": str(event["hold"])}
            if stopping.is_set():
                return
            continue
        if "tool_call" in event:
            call = event["tool_call"]
            entry: dict[str, Any] = {
                "index": call["index"],
                "function": {"arguments": call.get("arguments", "")},
            }
            if call.get("id"):
                entry["id"] = call["id"]
                entry["type"] = "function"
                entry["function"]["name"] = call.get("name", "ipython")
            elif call.get("name"):  # a whole call without an id (older Ollama)
                entry["type"] = "function"
                entry["function"]["name"] = call["name"]
            yield frame({"tool_calls": [entry]})
        else:
            yield frame(dict(event))
    yield frame({}, reply.get("finish_reason"))
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    # `omit_usage`: a server that ignores `stream_options.include_usage` (sends no usage at all).
    if not reply.get("omit_usage") and (reply.get("usage") is not None or include_usage):
        final = frame({})
        final["choices"] = []
        final["usage"] = reply.get("usage") or default_usage(body, reply)
        yield final


def whole_completion(
    body: Mapping[str, Any],
    reply: Response,
    stopping: threading.Event,
    holds: Callable[[str], threading.Event] | None = None,
) -> dict[str, Any]:
    """The same scripted reply as one non-streamed `chat.completion` object."""
    content, reasoning_text = "", ""
    calls: dict[int, dict[str, Any]] = {}
    for event in reply.get("events", []):
        if "sleep" in event:
            stopping.wait(float(event["sleep"]))
        elif "hold" in event and holds is not None:
            held = holds(str(event["hold"]))
            deadline = time.monotonic() + HOLD_LIMIT
            while not held.wait(0.05) and not stopping.is_set() and time.monotonic() < deadline:
                pass
        elif "content" in event:
            content += event["content"]
        elif "reasoning_content" in event or "reasoning" in event:
            reasoning_text += event.get("reasoning_content") or event.get("reasoning") or ""
        elif "drop" in event:
            raise ConnectionResetError("scripted drop")
        elif "tool_call" in event:
            call = event["tool_call"]
            slot = calls.setdefault(
                call["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
            )
            if call.get("id"):
                slot["id"] = call["id"]
                slot["function"]["name"] = call.get("name", "ipython")
            slot["function"]["arguments"] += call.get("arguments", "")
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if reasoning_text:
        message["reasoning_content"] = reasoning_text
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "scripted-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": reply.get("finish_reason") or "stop"}],
        "usage": reply.get("usage") or default_usage(body, reply),
    }
