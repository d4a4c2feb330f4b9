"""Turn events and prompt parts: the records agent_core speaks in.

acp_server maps these onto ACP `session/update`s; agent_core never sees wire types. Every record is
frozen so an event can be fanned out (editor, transcript, tests) without being mutated on the way.
Fields may be added; existing names are a contract with acp_server.
"""

from __future__ import annotations

import _thread
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def _record(cls: type[_T]) -> type[_T]:
    """`@dataclass(frozen=True)`, with `__repr__`, `__eq__` and `__hash__` that behave as the ones
    `dataclass` writes but are built from closures rather than compiled source per class: about a
    third of what 26 records cost at import, on the path to the first `session/new` answer."""
    made: Any = dataclass(frozen=True, repr=False, eq=False)(cls)
    every = fields(made)
    shown = tuple(f.name for f in every if f.repr)
    compared = _values([f.name for f in every if f.compare])
    hashed = _values([f.name for f in every if f.hash or (f.hash is None and f.compare)])
    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = (id(self), _thread.get_ident())
        if key in running:  # a record inside itself, as dataclass's repr shows it
            return "..."
        running.add(key)
        try:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
            return f"{self.__class__.__qualname__}({inner})"
        finally:
            running.discard(key)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    for method in (__repr__, __eq__, __hash__):
        method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
        setattr(made, method.__name__, method)
    return cls  # the same class: dataclass without slots fills it in place


def _values(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of these attributes (dataclass compares and hashes the tuple, not the values)."""
    return lambda record: tuple([getattr(record, name) for name in names])


# ---------------------------------------------------------------- prompt parts (editor -> agent)


@_record
class TextPart:
    """Prompt text."""

    text: str


@_record
class ImagePart:
    """A prompt image (base64 data), with its URI when the client gave one."""

    data: str  # base64
    mime_type: str
    uri: str | None = None


@_record
class ResourcePart:
    """An embedded resource: text inlined with its URI, or a base64 blob."""

    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


@_record
class ResourceLinkPart:
    """A link; `file://` links are read from disk, other schemes kept as references."""

    uri: str
    name: str
    mime_type: str | None = None


PromptPart = TextPart | ImagePart | ResourcePart | ResourceLinkPart

# ---------------------------------------------------------------- turn events (agent -> editor)

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


@_record
class UserMessage:
    """The user's prompt (emitted only in load replays)."""

    parts: tuple[PromptPart, ...]
    message_id: str


@_record
class MessageChunk:
    """A piece of the agent's reply text."""

    text: str
    message_id: str


@_record
class ThoughtChunk:
    """A piece of the model's reasoning text."""

    text: str
    message_id: str


@_record
class CellStarted:
    """A model tool call `ipython(code, title?)` about to run (after permission, if asked)."""

    cell_id: str
    code: str
    title: str


@_record
class CellOutput:
    """Text a running cell wrote to stdout or stderr."""

    cell_id: str
    stream: Literal["stdout", "stderr"]
    text: str


@_record
class CellDisplay:
    """display_data / execute_result: a mime bundle (images are base64 strings)."""

    cell_id: str
    data: Mapping[str, str]
    is_result: bool = False


@_record
class CellClear:
    """The cell cleared its output (IPython `clear_output`)."""

    cell_id: str


@_record
class FileEdited:
    """A file written through the kernel's `editor` skill during a cell (diff + location)."""

    cell_id: str
    path: str
    old_text: str | None
    new_text: str


@_record
class CellFinished:
    """A cell ended: how, the error if any, the output the model gets, its duration."""

    cell_id: str
    status: Literal["completed", "failed", "cancelled"]
    error: str | None = None  # "ename: evalue" (or "kernel died ...") when failed
    output: str = ""  # the head+tail truncated text the model receives
    duration: float = 0.0  # seconds the kernel spent on the cell (0 when it never ran)


@_record
class UsageReport:
    """Context window use after a model request, and that request's token counts."""

    used: int  # tokens in context now
    size: int  # model window
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@_record
class TitleChanged:
    """The session's title changed."""

    title: str


@_record
class PlanEntry:
    """One entry of the session's plan."""

    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


@_record
class PlanChanged:
    """The whole plan, as it is now."""

    entries: tuple[PlanEntry, ...]


@_record
class RefinementReported:
    """A refinement result (applied or refused) to show as an edit card + a one-line message."""

    refinement_id: str
    summary: str
    scope: Literal["local", "global", "project"]  # trust: + project
    edits: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    applied: bool = True
    error: str | None = None
    # The job itself failed (the planner's reply could not be used, the endpoint failed): `error`
    # says why, and the message says it once (not as a refused apply of "Refinement failed").
    failed: bool = False
    # The replays that decided it (`refine_verify = "replay"`, agent_core/refinement/replay.py's
    # `ReplayReport.to_json()`): both runs, the verdict, the cost; None when it was not replayed.
    replay: Mapping[str, Any] | None = None


@_record
class GateStarted:
    """An autonomous-mode gate command about to run as a process (a tool card `Gate: <command>`)."""

    gate_id: str
    command: str
    # Where the command came from, for the card ("project .continual-acp/gates.toml, pinned when
    # the loop started"); empty in records written before it existed.
    source: str = ""


@_record
class GateOutput:
    """Text a running gate printed."""

    gate_id: str
    text: str


@_record
class GateFinished:
    """A gate's verdict. `not_rerun`: skipped because the workspace is unchanged since it last failed."""

    gate_id: str
    command: str
    status: Literal["completed", "failed"]
    summary: str  # "passed", "failed (exit code 1)", "timed out after 600 s", "not rerun: ..."
    exit_code: int | None = None
    output: str = ""  # bounded head + tail
    not_rerun: bool = False


@_record
class GoalChanged:
    """The session's goal was set, changed, paused, resumed, completed or cleared (None)."""

    objective: str | None
    state: str | None  # "active" | "paused" | "complete" | None when cleared
    status_line: str = ""


@_record
class SubagentChanged:
    """A spawned child changed state: its card in the parent's thread follows it. Recorded in the
    parent's transcript (outside any turn, too), so `session/load` of the parent replays the card."""

    child_session_id: str
    name: str
    task: str
    # "queued" | "running" | "needs-action" | "idle" | "finished" | "failed" | "cancelled" | "interrupted"
    state: str
    parent_session_id: str
    answer: str | None = None  # the final answer (bounded), once finished
    reason: str | None = None  # why it failed, was cancelled or interrupted


@_record
class TurnEnded:
    """Always the last event of a turn."""

    stop_reason: StopReason
    message: str | None = None  # a visible explanation (truncation, limit), already sent as a chunk


NoticeSeverity = Literal["info", "warning", "error"]


@_record
class Notice:
    """Something the user should know that is not part of the answer (a kernel replaced, an MCP server
    that failed, a sandbox not in force): ACP `notice` where the client shows them. Live information:
    recorded with its turn but never replayed. `fallback`: clients without notices get it as an agent
    message (False when the user already sees it elsewhere, e.g. on a failed cell card)."""

    severity: NoticeSeverity
    title: str
    description: str | None = None
    fallback: bool = True


CompactionStatus = Literal["in_progress", "completed", "failed"]


@_record
class CompactionChanged:
    """A context compaction started (`in_progress`), finished with its summary, or failed."""

    compaction_id: str
    status: CompactionStatus
    summary: str | None = None  # with `completed`: what the model context restarts from
    error: str | None = None  # with `failed`


TurnEvent = (
    UserMessage
    | MessageChunk
    | ThoughtChunk
    | CellStarted
    | CellOutput
    | CellDisplay
    | CellClear
    | FileEdited
    | CellFinished
    | UsageReport
    | TitleChanged
    | PlanChanged
    | RefinementReported
    | GateStarted
    | GateOutput
    | GateFinished
    | GoalChanged
    | SubagentChanged
    | TurnEnded
    | Notice
    | CompactionChanged
)
