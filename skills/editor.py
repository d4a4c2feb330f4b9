"""`editor`: read and write files through the editor, so its buffers, diff review and undo see them.

    text = editor.read("src/app.py")       # sees unsaved changes in the editor
    editor.write("src/app.py", new_text)   # shown to the user as a diff
    reply = await editor.ask("Release now?", choices=["yes", "not yet"])
    reply["status"], reply["answer"]       # "answered", "yes"

Relative paths are resolved against the kernel's working directory (the session's cwd). The server
does these for the cell, under the cell's rules: `.continual-acp/`, `.git`, protected paths, the
server's data dir and `/proc` (and, in a sandbox, anything outside the workspace it could not
reach itself) raise PermissionError naming the path and why.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kernel_bridge import hostclient as bridge
from skills._awaitable import Answer

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["ask", "read", "write"]


def _absolute(path: str | os.PathLike[str]) -> str:
    return os.path.abspath(os.fspath(path))


def read(path: str | os.PathLike[str]) -> str:
    """The file's text as the editor has it."""
    return str(bridge.call("editor.read", path=_absolute(path)))


def write(path: str | os.PathLike[str], text: str) -> None:
    """Replace the file's text (creating it if needed) through the editor."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    bridge.call("editor.write", path=_absolute(path), text=text)


def ask(question: str, choices: Sequence[str] | None = None, *, timeout: float = 300.0) -> Answer:
    """Ask the user `question` as a form in the editor (a choice among `choices` when given).

    Returns `{"status": ..., "answer": ...}`: `answered` with the text or choice; `declined`,
    `cancelled`, `timeout` (no answer within `timeout` seconds) or `unsupported` (the editor has no
    forms: nothing was shown) with `answer` None. Works with and without `await`."""
    reply = bridge.call(
        "editor.ask",
        question=question,
        choices=list(choices) if choices is not None else None,
        timeout=timeout,
    )
    return Answer(reply if isinstance(reply, dict) else {"status": "cancelled", "answer": None})
