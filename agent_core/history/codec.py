"""Turn events and prompt parts to and from JSON objects (transcript lines)."""

from __future__ import annotations

import dataclasses
from typing import Any

from agent_core import events as ev

_PARTS: dict[str, type] = {
    "text": ev.TextPart,
    "image": ev.ImagePart,
    "resource": ev.ResourcePart,
    "resource_link": ev.ResourceLinkPart,
}
_PART_NAMES = {cls: name for name, cls in _PARTS.items()}

_EVENTS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ev.UserMessage,
        ev.MessageChunk,
        ev.ThoughtChunk,
        ev.CellStarted,
        ev.CellOutput,
        ev.CellDisplay,
        ev.CellClear,
        ev.FileEdited,
        ev.CellFinished,
        ev.UsageReport,
        ev.TitleChanged,
        ev.PlanChanged,
        ev.RefinementReported,
        ev.GateStarted,
        ev.GateOutput,
        ev.GateFinished,
        ev.GoalChanged,
        ev.SubagentChanged,
        ev.TurnEnded,
        ev.Notice,
        ev.CompactionChanged,
    )
}


def part_to_json(part: ev.PromptPart) -> dict[str, Any]:
    return {"type": _PART_NAMES[type(part)], **dataclasses.asdict(part)}


def part_from_json(data: dict[str, Any]) -> ev.PromptPart:
    fields = dict(data)
    cls = _PARTS.get(str(fields.pop("type", "")))
    if cls is None:
        raise ValueError(f"unknown prompt part type {data.get('type')!r}")
    part: ev.PromptPart = cls(**fields)
    return part


def event_to_json(event: ev.TurnEvent) -> dict[str, Any]:
    if isinstance(event, ev.UserMessage):
        return {
            "kind": "UserMessage",
            "message_id": event.message_id,
            "parts": [part_to_json(p) for p in event.parts],
        }
    body = dataclasses.asdict(event)
    if isinstance(event, ev.CellDisplay):
        body["data"] = dict(event.data)
    return {"kind": type(event).__name__, **body}


def event_from_json(data: dict[str, Any]) -> ev.TurnEvent:
    fields = dict(data)
    kind = str(fields.pop("kind", ""))
    cls = _EVENTS.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    if cls is ev.UserMessage:
        return ev.UserMessage(
            parts=tuple(part_from_json(p) for p in fields["parts"]), message_id=fields["message_id"]
        )
    if cls is ev.PlanChanged:
        return ev.PlanChanged(entries=tuple(ev.PlanEntry(**e) for e in fields.get("entries", ())))
    if cls is ev.RefinementReported:
        fields["edits"] = tuple(fields.get("edits", ()))
    event: ev.TurnEvent = cls(**fields)
    return event
