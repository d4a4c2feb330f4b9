"""One cell's tool card: the code, its (bounded) output, images, diffs, and the terminal trio.

`tool_call_update.content` replaces the previous array, so every update re-sends the whole card;
keeping the shown output bounded (head + tail) keeps each update small however much a cell prints.
The full output is the kernel's business (it keeps a file); the model gets its own truncated text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Output shown in the card: the first HEAD and the last TAIL characters.
HEAD_CHARS = 16 * 1024
TAIL_CHARS = 48 * 1024
MAX_IMAGES = 20
# Terminal view (`_meta.terminal_output` data): stop streaming after this many characters.
TERMINAL_LIMIT = 1024 * 1024
_TITLE_LIMIT = 80


def cell_title(code: str, title: str | None) -> str:
    """A short human description: the given title, else the first comment, else the first statement."""
    if title and title.strip():
        return _clip(title.strip())
    lines = [line.strip() for line in code.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("#") and not line.startswith("#!"):
            text = line.lstrip("#").strip()
            if text:
                return _clip(text)
    for line in lines:
        if not line.startswith("#"):
            return _clip(f"Run: {line}")
    return "Run an empty cell"


def _clip(text: str) -> str:
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= _TITLE_LIMIT else text[: _TITLE_LIMIT - 1] + "…"


def _fence(text: str, lang: str = "") -> str:
    # A fence longer than any backtick run inside, so code containing ``` still renders.
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


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
    cell_id: str
    code: str
    title: str
    cwd: str
    terminal: bool
    head: str = ""
    tail: str = ""
    omitted: int = 0
    images: list[dict[str, Any]] = field(default_factory=list)
    images_omitted: int = 0
    diffs: list[dict[str, Any]] = field(default_factory=list)
    locations: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    traceback: str = ""
    terminal_pending: str = ""
    terminal_sent: int = 0
    terminal_capped: bool = False
    dirty: bool = False
    started: bool = False  # the `tool_call` went out
    running: bool = False  # the cell really started in the kernel
    language: str = "python"  # of the code block ("sh" for an autonomous-mode gate command)
    raw_input_key: str = "code"

    # ------------------------------------------------------------ accumulate

    def add_output(self, text: str) -> None:
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
        self.head = self.tail = ""
        self.omitted = 0
        self.images.clear()
        self.dirty = True
        if self.terminal and not self.terminal_capped:
            self.terminal_pending += "\x1b[2J\x1b[H"

    def add_display(self, data: dict[str, str], is_result: bool) -> None:
        for mime in ("image/png", "image/jpeg", "image/gif", "image/webp"):
            if mime in data:
                if len(self.images) < MAX_IMAGES:
                    self.images.append(
                        {
                            "type": "content",
                            "content": {"type": "image", "data": data[mime], "mimeType": mime},
                        }
                    )
                else:
                    self.images_omitted += 1
                self.dirty = True
                return
        markdown = data.get("text/markdown")
        if markdown:
            # Shown as markdown (rendered by the editor), not as fenced plain output.
            self.images.append(_text_block(markdown))
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
        self.diffs.append({"type": "diff", "path": path, "oldText": old_text, "newText": new_text})
        if not any(loc["path"] == path for loc in self.locations):
            self.locations.append({"path": path})
        self.dirty = True

    # ------------------------------------------------------------ render

    def output_text(self) -> str:
        if not self.omitted:
            return self.head + self.tail
        return f"{self.head}\n[... {self.omitted} characters omitted ...]\n{self.tail}"

    def content(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = [_text_block(_fence(self.code, self.language))]
        if self.terminal:
            blocks.append({"type": "terminal", "terminalId": self.cell_id})
        output = self.output_text()
        # With a terminal the output is shown there, once; but a capped terminal view stops streaming,
        # so the card then keeps the bounded head + tail, or the end of the output would be lost.
        if output and (not self.terminal or self.terminal_capped):
            blocks.append(_text_block(_fence(output.rstrip("\n"))))
        blocks.extend(self.images)
        if self.images_omitted:
            blocks.append(_text_block(f"[{self.images_omitted} more images not shown]"))
        blocks.extend(self.diffs)
        if self.traceback:
            blocks.append(_text_block(_fence(self.traceback)))
        if self.error:
            blocks.append(_text_block(f"**Error:** {self.error}"))
        return blocks

    def start_update(self) -> dict[str, Any]:
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": self.cell_id,
            "title": self.title,
            "kind": "execute",
            "status": "pending",
            "content": self.content(),
            "rawInput": {self.raw_input_key: self.code},
        }
        if self.terminal:
            update["_meta"] = {"terminal_info": {"terminal_id": self.cell_id, "cwd": self.cwd}}
        return update

    def progress_update(self, status: str | None = None) -> dict[str, Any]:
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": self.cell_id}
        if status is not None:
            update["status"] = status
        update["content"] = self.content()
        if self.locations:
            update["locations"] = list(self.locations)
        if self.terminal and self.terminal_pending:
            update["_meta"] = {
                "terminal_output": {"terminal_id": self.cell_id, "data": self.terminal_pending}
            }
            self.terminal_sent += len(self.terminal_pending)
            self.terminal_pending = ""
        self.dirty = False
        return update

    def final_update(self, status: str, error: str | None, model_output: str) -> dict[str, Any]:
        if error:
            self.error = error
        if status == "failed" and model_output:
            self.traceback = _traceback_of(model_output, self.output_text())
        wire_status = "completed" if status == "completed" else "failed"
        if status == "cancelled" and not self.error:
            self.error = "cancelled (the cell was interrupted)" if self.running else "cancelled before it ran"
        update = self.progress_update(wire_status)
        update["rawOutput"] = {"status": status, **({"error": error} if error else {})}
        if self.terminal:
            meta = update.setdefault("_meta", {})
            meta["terminal_exit"] = {
                "terminal_id": self.cell_id,
                "exit_code": 0 if status == "completed" else 1,
                "signal": "SIGINT" if status == "cancelled" else None,
            }
        return update
