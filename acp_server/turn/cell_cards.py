"""One cell's tool card: the code, its (bounded) output, images, diffs, and the terminal trio.

`tool_call_update.content` replaces the previous array, so every update re-sends the whole card;
keeping the shown output bounded (head + tail) keeps each update small however much a cell prints.
The full output is the kernel's business (it keeps a file); the model gets its own truncated text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from acp_server.protocol import frames
from acp_server.protocol.frames import Frame

# Output shown in the card: the first HEAD and the last TAIL characters.
HEAD_CHARS = 16 * 1024
TAIL_CHARS = 48 * 1024
MAX_IMAGES = 20
# Terminal view (`_meta.terminal_output` data): stop streaming after this many characters.
TERMINAL_LIMIT = 1024 * 1024


def _fence(text: str, lang: str = "") -> str:
    # A fence longer than any backtick run inside, so code containing ``` still renders.
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


# Traceback shown in a failed cell's card: its last TRACEBACK_CHARS characters.
TRACEBACK_CHARS = 4000
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_DEFAULT_REPR = re.compile(r"^<IPython\.core\.display\.(\w+) object>$")
_TAGS = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]+>", re.DOTALL | re.IGNORECASE)


def _traceback_of(model_output: str, shown: str) -> str:
    """What a failed cell's output adds to what the card already shows (the traceback), bounded."""
    rest = model_output[len(shown) :] if shown and model_output.startswith(shown) else model_output
    rest = _ANSI.sub("", rest).strip("\n")
    if len(rest) > TRACEBACK_CHARS:
        rest = "[...]\n" + rest[-TRACEBACK_CHARS:]
    return rest


def _html_text(html: str) -> str:
    import html as html_lib

    text = html_lib.unescape(_TAGS.sub(" ", html))
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


@dataclass
class CellCard:
    """One cell's card as the editor shows it; `title` is agent_core's (`turn.cell_title`)."""

    cell_id: str
    code: str
    title: str
    cwd: str
    terminal: bool
    head: str = ""
    tail: str = ""
    omitted: int = 0
    images: list[Frame] = field(default_factory=list)
    images_omitted: int = 0
    diffs: list[Frame] = field(default_factory=list)
    locations: list[Frame] = field(default_factory=list)
    error: str | None = None
    traceback: str = ""
    terminal_pending: str = ""
    terminal_sent: int = 0
    terminal_capped: bool = False
    dirty: bool = False
    started: bool = False  # the `tool_call` went out
    running: bool = False  # the cell really started in the kernel

    # ------------------------------------------------------------ accumulate

    def add_output(self, text: str) -> None:
        """Stream text into the bounded head + tail (and the terminal view)."""
        if not text:
            return
        self.dirty = True
        if self.terminal:
            self._add_terminal(text)
        room = HEAD_CHARS - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if not text:
            return
        self.tail += text
        if len(self.tail) > TAIL_CHARS:
            cut = len(self.tail) - TAIL_CHARS
            self.omitted += cut
            self.tail = self.tail[cut:]

    def _add_terminal(self, text: str) -> None:
        if self.terminal_capped:
            return
        room = TERMINAL_LIMIT - self.terminal_sent - len(self.terminal_pending)
        if len(text) > room:
            text = (
                text[: max(room, 0)] + "\r\n[... terminal view stopped here; the card keeps the tail ...]\r\n"
            )
            self.terminal_capped = True
        # Terminals want CRLF; the kernel's streams use bare LF.
        self.terminal_pending += text.replace("\r\n", "\n").replace("\n", "\r\n")

    def clear_output(self) -> None:
        """`clear_output()` in the cell: the shown output and images start over."""
        self.head = self.tail = ""
        self.omitted = 0
        self.images.clear()
        self.dirty = True
        if self.terminal and not self.terminal_capped:
            self.terminal_pending += "\x1b[2J\x1b[H"

    def add_display(self, data: dict[str, str], is_result: bool) -> None:
        """A display (or the cell's result): an image, markdown, or its best text form."""
        for mime in ("image/png", "image/jpeg", "image/gif", "image/webp"):
            if mime in data:
                if len(self.images) < MAX_IMAGES:
                    self.images.append(frames.tool_content(frames.image_block(data[mime], mime)))
                else:
                    self.images_omitted += 1
                self.dirty = True
                return
        markdown = data.get("text/markdown")
        if markdown:
            # Shown as markdown (rendered by the editor), not as fenced plain output.
            self.images.append(frames.tool_text(markdown))
            self.dirty = True
            return
        text = data.get("text/plain")
        default = _DEFAULT_REPR.match(text.strip()) if text is not None else None
        if "text/html" in data and (text is None or default):
            # `<IPython.core.display.HTML object>` says nothing: show the HTML's text instead.
            text = _html_text(data["text/html"]) or "(HTML output not shown)"
        elif default:
            # The rich form (HTML, JavaScript...) cannot be shown in the card; its repr says nothing.
            text = f"({default.group(1)} output not shown)"
        if text is not None:
            self.add_output(text if text.endswith("\n") else text + "\n")

    def add_diff(self, path: str, old_text: str | None, new_text: str) -> None:
        """A file the cell wrote through the `editor` skill: a diff block and a location."""
        self.diffs.append(frames.tool_diff(path, old_text, new_text))
        if not any(loc["path"] == path for loc in self.locations):
            self.locations.append(frames.location(path))
        self.dirty = True

    # ------------------------------------------------------------ render

    def output_text(self) -> str:
        """The shown output: head, the omitted count, tail."""
        if not self.omitted:
            return self.head + self.tail
        return f"{self.head}\n[... {self.omitted} characters omitted ...]\n{self.tail}"

    def content(self) -> list[Frame]:
        """The whole card's content (each update replaces the previous array)."""
        blocks: list[Frame] = [frames.tool_text(_fence(self.code, "python"))]
        if self.terminal:
            blocks.append(frames.tool_terminal(self.cell_id))
        output = self.output_text()
        # With a terminal the output is shown there, once; but a capped terminal view stops streaming,
        # so the card then keeps the bounded head + tail, or the end of the output would be lost.
        if output and (not self.terminal or self.terminal_capped):
            blocks.append(frames.tool_text(_fence(output.rstrip("\n"))))
        blocks.extend(self.images)
        if self.images_omitted:
            blocks.append(frames.tool_text(f"[{self.images_omitted} more images not shown]"))
        blocks.extend(self.diffs)
        if self.traceback:
            blocks.append(frames.tool_text(_fence(self.traceback)))
        if self.error:
            # Plain text: several clients show card text literally (no Markdown), `**` included.
            blocks.append(frames.tool_text(f"Error: {self.error}"))
        return blocks

    def start_update(self) -> Frame:
        """The `tool_call` that opens the card (pending)."""
        return frames.cell_started_update(
            self.cell_id,
            self.title,
            self.code,
            self.content(),
            terminal_cwd=self.cwd if self.terminal else None,
        )

    def permission_tool_call(self) -> Frame:
        """The card as a permission request's `toolCall`: pending, showing the code only."""
        return frames.cell_tool_call(self.cell_id, self.title, self.code, self.content()[:1])

    def _take_terminal_data(self) -> str | None:
        if not (self.terminal and self.terminal_pending):
            return None
        data = self.terminal_pending
        self.terminal_sent += len(data)
        self.terminal_pending = ""
        return data

    def progress_update(self, status: str | None = None) -> Frame:
        """A `tool_call_update` with the whole card and any new terminal output."""
        content = self.content()
        update = frames.cell_progress_update(
            self.cell_id,
            content,
            status=status,
            locations=self.locations,
            terminal_data=self._take_terminal_data(),
        )
        self.dirty = False
        return update

    def final_update(self, status: str, error: str | None, model_output: str) -> Frame:
        """The last `tool_call_update`: completed or failed, with the traceback or the reason."""
        if error:
            self.error = error
        if status == "failed" and model_output:
            self.traceback = _traceback_of(model_output, self.output_text())
        if status == "cancelled" and not self.error:
            self.error = "cancelled (the cell was interrupted)" if self.running else "cancelled before it ran"
        content = self.content()
        update = frames.cell_finished_update(
            self.cell_id,
            content,
            outcome=status,
            error=error,
            locations=self.locations,
            terminal=self.terminal,
            terminal_data=self._take_terminal_data(),
        )
        self.dirty = False
        return update
