"""The conversation as the review gate and the planner read it: one block per message, with ids.

Ids are what evidence cites (a refinement names the messages that justify it), so every block starts with `[<id>]`. The window
is the *end* of the conversation (recent turns matter most) and each tool result is cut to a few
thousand characters so one noisy cell cannot crowd out the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from agent_core.events import (
    CellFinished,
    CellStarted,
    GateFinished,
    ImagePart,
    MessageChunk,
    ResourceLinkPart,
    ResourcePart,
    TextPart,
    TurnEvent,
    UserMessage,
)

REVIEW_WINDOW_CHARS = 40_000
PLANNER_WINDOW_CHARS = 80_000
TOOL_RESULT_CHARS = 2_000

Role = Literal["user", "assistant", "tool_call", "tool_result", "gate"]  # gate: an autonomous loop's verdict


@dataclass(frozen=True)
class TrajectoryItem:
    """One message of the conversation; `message_id` is the id evidence may cite."""

    message_id: str
    role: Role
    text: str
    title: str | None = None
    status: str | None = None


def _prompt_text(message: UserMessage) -> str:
    pieces: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ImagePart):
            pieces.append(f"[image {part.mime_type}]")
        elif isinstance(part, ResourcePart):
            pieces.append(f"[resource {part.uri}]\n{part.text}" if part.text else f"[resource {part.uri}]")
        elif isinstance(part, ResourceLinkPart):
            pieces.append(f"[link {part.uri}]")
    return "\n".join(pieces)


def trajectory_from_events(events: Iterable[TurnEvent]) -> list[TrajectoryItem]:
    """Fold turn events into messages: chunks joined per message id, a cell as call + result.

    Thoughts are left out: they are not evidence a user can check, and they are the bulk of the
    text with reasoning models.
    """
    items: list[TrajectoryItem] = []
    open_message: dict[str, int] = {}  # message id -> index in items, for chunk coalescing
    for event in events:
        if isinstance(event, UserMessage):
            items.append(TrajectoryItem(event.message_id, "user", _prompt_text(event)))
        elif isinstance(event, MessageChunk):
            index = open_message.get(event.message_id)
            if index is None:
                open_message[event.message_id] = len(items)
                items.append(TrajectoryItem(event.message_id, "assistant", event.text))
            else:
                prior = items[index]
                items[index] = TrajectoryItem(prior.message_id, "assistant", prior.text + event.text)
        elif isinstance(event, CellStarted):
            items.append(TrajectoryItem(event.cell_id, "tool_call", event.code, title=event.title))
        elif isinstance(event, CellFinished):
            body = event.output
            if event.error:
                body = f"{body}\n{event.error}" if body else event.error
            items.append(TrajectoryItem(event.cell_id, "tool_result", body, status=event.status))
        elif isinstance(event, GateFinished):
            # A gate's verdict is a step too: a failed one is a failure a proposal may claim to fix.
            body = f"{event.summary}\n{event.output}" if event.output else event.summary
            items.append(
                TrajectoryItem(event.gate_id, "gate", body, title=event.command, status=event.status)
            )
    return items


def message_ids(items: Iterable[TrajectoryItem]) -> set[str]:
    return {item.message_id for item in items}


def _cut_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[-tail:]}"


def render_item(item: TrajectoryItem, *, tool_result_chars: int = TOOL_RESULT_CHARS) -> str:
    if item.role == "user":
        return f"[{item.message_id}] user:\n{item.text}"
    if item.role == "assistant":
        return f"[{item.message_id}] assistant:\n{item.text}"
    if item.role == "tool_call":
        title = f" ({item.title})" if item.title else ""
        return f"[{item.message_id}] assistant ran a python cell{title}:\n{item.text}"
    status = item.status or "finished"
    if item.role == "gate":
        return f"[{item.message_id}] gate `{item.title}` ({status}):\n{_cut_middle(item.text, tool_result_chars)}"
    return f"[{item.message_id}] cell result ({status}):\n{_cut_middle(item.text, tool_result_chars)}"


def render_trajectory(
    items: Sequence[TrajectoryItem],
    *,
    max_chars: int,
    tool_result_chars: int = TOOL_RESULT_CHARS,
) -> str:
    """The last `max_chars` characters of the conversation, whole messages where they fit.

    Older messages are dropped first and counted; the oldest kept message is cut at its head when
    even it does not fit, so the window is always filled with the most recent text.
    """
    blocks = [render_item(item, tool_result_chars=tool_result_chars) for item in items]
    kept: list[str] = []
    used = 0
    for block in reversed(blocks):
        cost = len(block) + 2
        if used + cost > max_chars:
            room = max_chars - used - 2
            if room > 200:  # a sliver of a message is noise, not evidence
                kept.append("[... earlier part of this message omitted ...]\n" + block[-room:])
            break
        kept.append(block)
        used += cost
    kept.reverse()
    dropped = len(blocks) - len(kept)
    if dropped > 0:
        kept.insert(0, f"[... {dropped} earlier messages omitted ...]")
    return "\n\n".join(kept)
