"""Compaction: summarize older turns with the model, keep the most recent turns verbatim.

The cut is always at a user message, so an assistant tool call and its tool results are never
separated. The kernel is not touched: its variables survive, and the summary says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_core.errors import ModelError
from agent_core.model import ModelClient

TOOL_RESULT_CHARS = 2_000  # per tool result in the text given to the summarizer
SUMMARY_INPUT_CHARS = 200_000  # the oldest part of a huge history is cut (head kept short)

SUMMARY_SYSTEM = """\
You compress a coding session so it can continue in a fresh context. Write a concise summary that \
keeps: the user's goals and preferences, decisions made, files read or changed (paths), commands run \
and their results, errors and how they were fixed, what is still open, and the names of variables, \
functions and data defined in the Python kernel (they still exist there). Drop chit-chat and verbatim \
outputs. Write plain Markdown, no preamble."""

SUMMARY_PREFIX = (
    "[Summary of the earlier part of this session, written when the context was compacted. "
    "The kernel still holds every variable defined before.]\n\n"
)


@dataclass(frozen=True)
class Compacted:
    """The summary of the older turns and the messages kept after it."""

    summary: str
    messages: list[dict[str, Any]]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "[image]") if isinstance(b, dict) else str(b) for b in content)
    return "" if content is None else str(content)


def render_for_summary(messages: Sequence[dict[str, Any]]) -> str:
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            text = _content_text(message.get("content"))
            if len(text) > TOOL_RESULT_CHARS:
                text = text[: TOOL_RESULT_CHARS // 2] + "\n[...]\n" + text[-TOOL_RESULT_CHARS // 2 :]
            lines.append(f"## tool result\n{text}")
            continue
        text = _content_text(message.get("content"))
        if text:
            lines.append(f"## {role}\n{text}")
        for call in message.get("tool_calls") or ():
            arguments = call.get("function", {}).get("arguments", "")
            try:
                code = json.loads(arguments).get("code", arguments)
            except (ValueError, AttributeError):
                code = arguments
            lines.append(f"## {role} ran a cell\n```python\n{code}\n```")
    rendered = "\n\n".join(lines)
    if len(rendered) > SUMMARY_INPUT_CHARS:
        rendered = "[... oldest part omitted ...]\n" + rendered[-SUMMARY_INPUT_CHARS:]
    return rendered


def split_point(messages: Sequence[dict[str, Any]], keep_recent_turns: int) -> int:
    """Index of the first message kept verbatim (a user message); 0 when there is nothing older."""
    user_indexes = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if len(user_indexes) <= keep_recent_turns:
        return 0
    return user_indexes[-keep_recent_turns] if keep_recent_turns > 0 else len(messages)


async def compact_messages(
    client: ModelClient,
    messages: Sequence[dict[str, Any]],
    *,
    model: str | None = None,
    keep_recent_turns: int = 2,
    instructions: str | None = None,
) -> Compacted | None:
    """The compacted context, or None when there is nothing older than the kept turns."""
    cut = split_point(messages, keep_recent_turns)
    older = [m for m in messages[:cut]]
    if not older or all(_content_text(m.get("content")).startswith(SUMMARY_PREFIX) for m in older):
        return None
    request = "Summarize this session so far.\n\n" + render_for_summary(older)
    if instructions:
        request += f"\n\nThe user asked the summary to focus on: {instructions}"
    done = await client.complete(
        [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": request}], model=model
    )
    if done.finish_reason == "length" or not done.text.strip():
        # A cut-off summary would silently lose history; keep the full context instead.
        raise ModelError("compaction failed: the model's summary was empty or cut off at its output limit")
    summary = done.text.strip()
    kept = [dict(m) for m in messages[cut:]]
    return Compacted(summary, [{"role": "user", "content": SUMMARY_PREFIX + summary}, *kept])
