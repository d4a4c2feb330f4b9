"""The text action format: for models and servers that do not do native tool calls.

In this format (the CodeAct convention) the model acts by writing a fenced code block: the first block
of an answer whose info string starts with `python` or `py` (`python`, `py`, `python3`, `py3`, ...) is
run as a cell; other languages are shown, not run; `%%bash` as the block's first line works as in any
cell. The output is fed back as the next user message and the turn ends with an answer that has no
such block.

Which format a session uses (`action_format`, env `CONTINUAL_ACP_ACTION_FORMAT`, config.toml):

* `tools` - native tool calls only (the model's fenced code is never run).
* `text` - the text format only: no `tools` are sent at all.
* `auto` (default) - tools first; the text format is chosen, for that endpoint and model in this
  process, when (a) the endpoint refuses the request because of its `tools` (HTTP 400 naming tools or
  functions: Ollama "does not support tools", llama.cpp without `--jinja`, vLLM without
  `--enable-auto-tool-choice`), the request then being retried without them, or (b) an answer has a
  runnable python block and no tool call, and this model has never made a native tool call in this
  process. (b) is a guess, kept narrow: one native tool call pins the model to `tools` for good, and
  the user is told when the switch happens (set `action_format = "tools"` to rule it out).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ActionFormat = Literal["tools", "text"]
FORMAT_CHOICES = ("auto", "tools", "text")

TEXT_FORMAT_PROMPT = """\
# Action format: fenced code blocks
This model endpoint does not take tool calls, so you run cells by writing them in your answer: the first \
fenced code block whose info string is `python` (or `py`) is run in the kernel, exactly like an `ipython` \
cell, and its output comes back to you in the next message. Write one such block per answer, then stop \
and wait for its output. Blocks in other languages are only shown to the user, never run; for shell \
commands put `%%bash` as the first line of a python block. When the work is done, answer without any \
python block: that ends your turn.
"""

# An opening fence: up to 3 spaces, 3+ backticks or tildes, then the info string.
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")
_RUNNABLE_INFO = re.compile(r"^(?:python|py)\S*$", re.IGNORECASE)


@dataclass(frozen=True)
class TextAction:
    """A runnable block found in an answer."""

    code: str
    info: str  # the block's info string, e.g. "python title=Count files"


def find_action(answer: str) -> TextAction | None:
    """The first fenced block whose info string starts with `python`/`py`, or None.

    A block still open at the end of the answer counts (small models often stop right after the
    code); a block in another language is skipped, and so is a runnable-looking block left empty.
    """
    lines = answer.split("\n")
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index].rstrip("\r"))
        index += 1
        if opening is None:
            continue
        fence = opening.group("fence")
        info = opening.group("info").strip()
        if fence[0] == "`" and "`" in info:
            continue  # not a fence: an inline code span (CommonMark)
        body: list[str] = []
        while index < len(lines):
            line = lines[index].rstrip("\r")
            index += 1
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(line)
        first_word = info.split(None, 1)[0] if info else ""
        code = "\n".join(body).strip("\n")
        if _RUNNABLE_INFO.match(first_word) and code.strip():
            return TextAction(code=code, info=info)
    return None


def output_message(output: str) -> str:
    """The user message that feeds a cell's output (or why it did not run) back to the model."""
    return f"Output of your python block:\n```\n{output}\n```"


def configured_format(extra: Mapping[str, object]) -> str:
    """`action_format` from the config (`auto` when unset); raises ValueError naming the bad value."""
    from agent_core.config.table import value

    return str(value(extra, "action_format"))


_TOOL_WORDS = ("tool", "function")


def tools_refused(status: int | None, message: str) -> bool:
    """A 400 whose message says the request's `tools` are not supported (wording varies by server)."""
    text = message.lower()
    return status == 400 and any(word in text for word in _TOOL_WORDS)


class FormatMemory:
    """What this process learned per (endpoint, model): text format chosen, or native calls seen."""

    def __init__(self) -> None:
        self._text: set[tuple[str, str]] = set()
        self._native: set[tuple[str, str]] = set()

    def current(self, configured: str, endpoint: str, model: str) -> ActionFormat:
        """The format the next request uses."""
        if configured in ("tools", "text"):
            return "text" if configured == "text" else "tools"
        return "text" if (endpoint, model) in self._text else "tools"

    def saw_tool_call(self, endpoint: str, model: str) -> None:
        """The model made a native tool call: it is never switched to the text format by a guess."""
        self._native.add((endpoint, model))

    def may_guess_text(self, configured: str, endpoint: str, model: str) -> bool:
        """Whether an answer with a python block and no tool call may switch this model to text."""
        return configured == "auto" and (endpoint, model) not in self._native

    def choose_text(self, endpoint: str, model: str) -> None:
        self._text.add((endpoint, model))


MEMORY = FormatMemory()

SWITCH_TITLE = "Text action format"
SWITCH_NOTICE = (
    "This model answered with a python block instead of a tool call, so the agent switched to the text "
    "action format: the first ```python block of each answer is run as a cell. "
    'Set action_format = "tools" (or CONTINUAL_ACP_ACTION_FORMAT=tools) to turn this off.'
)
REFUSED_NOTICE = (
    "The model endpoint refused tool calls, so the agent switched to the text action format: the first "
    "```python block of each answer is run as a cell."
)
