"""Typed records a running cell yields, and the summaries handed back to callers.

These are the only shapes other packages see; Jupyter message dicts never leave kernel_bridge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

CellStatus = Literal["ok", "error", "interrupted", "died"]


@dataclass(frozen=True, slots=True)
class Stream:
    """A chunk of stdout or stderr, in the order the kernel emitted it."""

    name: Literal["stdout", "stderr"]
    text: str


@dataclass(frozen=True, slots=True)
class Display:
    """A `display_data` / `update_display_data` bundle: mime type -> text (images base64)."""

    data: dict[str, str]


@dataclass(frozen=True, slots=True)
class Result:
    """The cell's `execute_result` bundle (the value of its last expression)."""

    data: dict[str, str]


@dataclass(frozen=True, slots=True)
class ClearOutput:
    """The cell asked to clear its output (`IPython.display.clear_output`)."""

    wait: bool = False


@dataclass(frozen=True, slots=True)
class Error:
    """An exception raised by the cell; traceback lines have ANSI colour codes stripped."""

    ename: str
    evalue: str
    traceback: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Finished:
    """Always the last event of a cell."""

    status: CellStatus
    duration: float


CellEvent = Stream | Display | Result | ClearOutput | Error | Finished


@dataclass(frozen=True, slots=True)
class CellResult:
    """What a finished cell amounts to.

    `output` is the text meant for the model: stdout/stderr, text/plain of results and displays, the
    traceback; head+tail truncated with a `[... N characters omitted ...]` marker. The complete text is
    at `full_output_path` (no file is created for a cell that printed nothing). `report` tells about a kernel restart that happened before or because of
    this cell (restored and lost names), else None.
    """

    status: CellStatus
    output: str
    error: Error | None
    full_output_path: Path
    duration: float
    report: str | None = None
    execution_count: int | None = None


@dataclass(frozen=True, slots=True)
class RestoreReport:
    """Outcome of loading a snapshot into a kernel: each name restored or failed independently.

    `failed` maps a name to why it could not be restored; `skipped` lists names the snapshot never
    held (unpicklable, over a cap), with the reason recorded when the snapshot was taken.
    """

    restored: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    snapshot_found: bool = True

    def describe(self) -> str:
        """A short text for the model saying what came back and what did not."""
        if not self.snapshot_found:
            return "No kernel snapshot was available; the kernel starts empty."
        parts = [f"Restored {len(self.restored)} name(s): {', '.join(self.restored) or '(none)'}."]
        if self.failed:
            parts.append(
                "Failed to restore: "
                + "; ".join(f"{n} ({why})" for n, why in sorted(self.failed.items()))
                + "."
            )
        if self.skipped:
            parts.append(
                "Not in the snapshot: "
                + "; ".join(f"{n} ({why})" for n, why in sorted(self.skipped.items()))
                + "."
            )
        return " ".join(parts)
