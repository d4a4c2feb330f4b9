"""One autonomous-mode gate's tool card: the command, its live (bounded) output, its verdict.

Like a cell's card, each update re-sends the whole content, so the shown output is bounded (head +
tail) however much a test suite prints; the model gets its own bounded text from agent_core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from acp_server.protocol import frames
from acp_server.protocol.frames import Frame

if TYPE_CHECKING:
    from agent_core.autonomy.runner import BoundedText

HEAD_CHARS = 8 * 1024
TAIL_CHARS = 24 * 1024
_TITLE_LIMIT = 80


def gate_title(command: str) -> str:
    text = " ".join(command.split())
    text = text if len(text) <= _TITLE_LIMIT - 6 else text[: _TITLE_LIMIT - 7] + "…"
    return f"Gate: {text}"


def _bounded() -> BoundedText:
    # Imported when a gate runs, never on the server's startup path (agent_core loads kernel_bridge).
    from agent_core.autonomy.runner import BoundedText

    return BoundedText(HEAD_CHARS, TAIL_CHARS)


def _fence(text: str, lang: str = "") -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{lang}\n{text}\n{ticks}"


@dataclass
class GateCard:
    """One gate run shown as a tool card: its command, where it came from, its bounded output."""

    cell_id: str  # the gate run's id (named like a cell's for the presenter's coalescing)
    command: str
    source: str = ""  # where the command came from (shown under it)
    dirty: bool = False
    started: bool = True
    _output: BoundedText = field(default_factory=lambda: _bounded())

    def add_output(self, text: str) -> None:
        if not text:
            return
        self.dirty = True
        self._output.add(text)

    def output_text(self) -> str:
        return self._output.text()

    def content(self, verdict: str | None = None) -> list[Frame]:
        blocks = [frames.tool_text(_fence(self.command, "sh"))]
        if self.source:
            blocks.append(frames.tool_text(f"from {self.source}"))
        output = self.output_text().rstrip("\n")
        if output:
            blocks.append(frames.tool_text(_fence(output)))
        if verdict:
            blocks.append(frames.tool_text(verdict))
        return blocks

    def start_update(self) -> Frame:
        return frames.gate_started_update(
            self.cell_id, gate_title(self.command), self.content(), self.command
        )

    def progress_update(self) -> Frame:
        self.dirty = False
        return frames.gate_progress_update(self.cell_id, self.content())

    def final_update(
        self, *, passed: bool, exit_code: int | None, summary: str, not_rerun: bool, recorded_output: str
    ) -> Frame:
        if recorded_output and not self.output_text():
            self.add_output(recorded_output)  # a replay streams nothing: show the recorded output
        verdict = "Gate passed." if passed else f"Gate {summary}."
        return frames.gate_finished_update(
            self.cell_id,
            self.content(verdict),
            passed=passed,
            exit_code=exit_code,
            summary=summary,
            not_rerun=not_rerun,
        )


def goal_meta(objective: str | None, state: str | None, status: str) -> Mapping[str, object] | None:
    if objective is None:
        return None
    return {"objective": objective, "state": state, "status": status}
