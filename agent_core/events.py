"""Turn events and prompt parts: the records agent_core speaks in.

acp_server maps these onto ACP `session/update`s; agent_core never sees wire types. Every record is
frozen so an event can be fanned out (editor, transcript, tests) without being mutated on the way.
Fields may be added; existing names are a contract with acp_server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# ---------------------------------------------------------------- prompt parts (editor -> agent)


@dataclass(frozen=True)
class TextPart:
    """Prompt text."""

    text: str


@dataclass(frozen=True)
class ImagePart:
    """A prompt image (base64 data), with its URI when the client gave one."""

    data: str  # base64
    mime_type: str
    uri: str | None = None


@dataclass(frozen=True)
class ResourcePart:
    """An embedded resource: text inlined with its URI, or a base64 blob."""

    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True)
class ResourceLinkPart:
    """A link; `file://` links are read from disk, other schemes kept as references."""

    uri: str
    name: str
    mime_type: str | None = None


PromptPart = TextPart | ImagePart | ResourcePart | ResourceLinkPart

# ---------------------------------------------------------------- turn events (agent -> editor)

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


@dataclass(frozen=True)
class UserMessage:
    """The user's prompt (emitted only in load replays)."""

    parts: tuple[PromptPart, ...]
    message_id: str


@dataclass(frozen=True)
class MessageChunk:
    """A piece of the agent's reply text."""

    text: str
    message_id: str


@dataclass(frozen=True)
class ThoughtChunk:
    """A piece of the model's reasoning text."""

    text: str
    message_id: str


@dataclass(frozen=True)
class CellStarted:
    """A model tool call `ipython(code, title?)` about to run (after permission, if asked)."""

    cell_id: str
    code: str
    title: str


@dataclass(frozen=True)
class CellOutput:
    """Text a running cell wrote to stdout or stderr."""

    cell_id: str
    stream: Literal["stdout", "stderr"]
    text: str


@dataclass(frozen=True)
class CellDisplay:
    """display_data / execute_result: a mime bundle (images are base64 strings)."""

    cell_id: str
    data: Mapping[str, str]
    is_result: bool = False


@dataclass(frozen=True)
class CellClear:
    """The cell cleared its output (IPython `clear_output`)."""

    cell_id: str


@dataclass(frozen=True)
class FileEdited:
    """A file written through the kernel's `editor` skill during a cell (diff + location)."""

    cell_id: str
    path: str
    old_text: str | None
    new_text: str


@dataclass(frozen=True)
class CellFinished:
    """A cell ended: how, the error if any, the output the model gets, its duration."""

    cell_id: str
    status: Literal["completed", "failed", "cancelled"]
    error: str | None = None  # "ename: evalue" (or "kernel died ...") when failed
    output: str = ""  # the head+tail truncated text the model receives
    duration: float = 0.0  # seconds the kernel spent on the cell (0 when it never ran)


@dataclass(frozen=True)
class UsageReport:
    """Context window use after a model request, and that request's token counts."""

    used: int  # tokens in context now
    size: int  # model window
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class TitleChanged:
    """The session's title changed."""

    title: str


@dataclass(frozen=True)
class PlanEntry:
    """One entry of the session's plan."""

    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


@dataclass(frozen=True)
class PlanChanged:
    """The whole plan, as it is now."""

    entries: tuple[PlanEntry, ...]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class GateStarted:
    """An autonomous-mode gate command about to run as a process (a tool card `Gate: <command>`)."""

    gate_id: str
    command: str
    # Where the command came from, for the card ("project .continual-acp/gates.toml, pinned when
    # the loop started"); empty in records written before it existed.
    source: str = ""


@dataclass(frozen=True)
class GateOutput:
    """Text a running gate printed."""

    gate_id: str
    text: str


@dataclass(frozen=True)
class GateFinished:
    """A gate's verdict. `not_rerun`: skipped because the workspace is unchanged since it last failed."""

    gate_id: str
    command: str
    status: Literal["completed", "failed"]
    summary: str  # "passed", "failed (exit code 1)", "timed out after 600 s", "not rerun: ..."
    exit_code: int | None = None
    output: str = ""  # bounded head + tail
    not_rerun: bool = False


@dataclass(frozen=True)
class GoalChanged:
    """The session's goal was set, changed, paused, resumed, completed or cleared (None)."""

    objective: str | None
    state: str | None  # "active" | "paused" | "complete" | None when cleared
    status_line: str = ""


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class TurnEnded:
    """Always the last event of a turn."""

    stop_reason: StopReason
    message: str | None = None  # a visible explanation (truncation, limit), already sent as a chunk


NoticeSeverity = Literal["info", "warning", "error"]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
