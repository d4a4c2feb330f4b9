"""`editor`: read and write files through the editor, so its buffers, diff review and undo see them.

    text = editor.read("src/app.py")       # sees unsaved changes in the editor
    editor.write("src/app.py", new_text)   # shown to the user as a diff

Relative paths are resolved against the kernel's working directory (the session's cwd). The server
does these for the cell, under the cell's rules: `.continual-acp/`, `.git`, protected paths, the
server's data dir and `/proc` (and, in a sandbox, anything outside the workspace it could not
reach itself) raise PermissionError naming the path and why.
"""

from __future__ import annotations

import os

from kernel_bridge import hostclient as bridge

__all__ = ["read", "write"]


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
