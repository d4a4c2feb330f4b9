"""Routing a kernel's iopub messages to the request (cell) they belong to.

Jupyter message dicts stop here: what leaves is output text for the model and typed cell events.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kernel_bridge.cell import CellRun
from kernel_bridge.events import ClearOutput, Display, Error, Result, Stream
from kernel_bridge.output import OutputCollector, strip_ansi

# Mime types passed on to callers; others (widgets, json) are not meaningful to a model or editor.
MIME_TYPES = ("text/plain", "text/markdown", "image/png", "image/jpeg")


class Request:
    """Bookkeeping of one execute_request while it is in flight."""

    def __init__(self, run: CellRun | None, collector: OutputCollector | None) -> None:
        self.run = run
        self.collector = collector
        self.idle = asyncio.Event()
        self.error: Error | None = None
        self.last_message = time.monotonic()
        # True once any iopub message of this request arrived (the kernel took it: at least `busy`).
        self.heard = False


def _bundle(content: dict[str, Any]) -> dict[str, str]:
    data = content.get("data", {})
    return {mime: value for mime, value in data.items() if mime in MIME_TYPES and isinstance(value, str)}


def _bundle_text(bundle: dict[str, str]) -> str:
    if "text/plain" in bundle:
        return bundle["text/plain"] + "\n"
    images = [mime for mime in bundle if mime.startswith("image/")]
    return "".join(f"[{mime} output]\n" for mime in images)


def route(request: Request, msg: dict[str, Any]) -> None:
    """Turn one iopub message of a request into output text and cell events."""
    kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
    content = msg.get("content", {})
    run, collector = request.run, request.collector
    if kind == "status":
        if content.get("execution_state") == "idle":
            request.idle.set()
        return
    if kind == "error":
        error = Error(
            str(content.get("ename", "")),
            str(content.get("evalue", "")),
            [strip_ansi(line) for line in content.get("traceback", [])],
        )
        request.error = error
        if collector is not None:
            collector.add("\n".join(error.traceback) + "\n")
        if run is not None:
            run.push(error)
        return
    if run is None or collector is None:
        return
    if kind == "stream":
        text = str(content.get("text", ""))
        collector.add(strip_ansi(text))
        run.push(Stream("stderr" if content.get("name") == "stderr" else "stdout", text))
    elif kind in ("display_data", "update_display_data"):
        bundle = _bundle(content)
        collector.add(_bundle_text(bundle))
        run.push(Display(bundle))
    elif kind == "execute_result":
        bundle = _bundle(content)
        collector.add(_bundle_text(bundle))
        run.push(Result(bundle))
    elif kind == "clear_output":
        run.push(ClearOutput(bool(content.get("wait", False))))
