"""Host-bridge operations behind the kernel's `editor` skill: `editor.read` and `editor.write`.

They go through the editor (`fs/read_text_file` sees unsaved buffers; `fs/write_text_file` lets the
editor show a diff and undo) when the client supports it, else straight to disk. Every write is
reported as a `FileEdited` event (old and new text) in the running turn.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from agent_core import events as ev
from agent_core.ports import EditorPort

if TYPE_CHECKING:
    from kernel_bridge import HostBridge

MAX_FILE_CHARS = 10_000_000  # refuse to shuttle files larger than this through the bridge


class EditorOpsHost(Protocol):
    """What the editor operations need of their session."""

    @property
    def cwd(self) -> str: ...

    @property
    def editor(self) -> EditorPort: ...

    @property
    def current_cell(self) -> str | None: ...

    def emit_into_turn(self, event: ev.TurnEvent) -> bool: ...


class EditorOps:
    """`editor.read` / `editor.write` for the kernel of one session."""

    def __init__(self, session: EditorOpsHost) -> None:
        self._session = session

    def register(self, host_bridge: HostBridge) -> None:
        """Serve both operations on `host_bridge` (the kernel's)."""
        host_bridge.register("editor.read", self.read)
        host_bridge.register("editor.write", self.write)

    def _path(self, args: dict[str, Any]) -> str:
        path = args.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError("editor: `path` must be a non-empty string")
        if not os.path.isabs(path):
            path = os.path.join(self._session.cwd, path)
        return os.path.normpath(path)

    async def _read(self, path: str) -> str | None:
        """The current text (the editor's buffer when possible); None if the file does not exist."""
        editor = self._session.editor
        if editor.can_read_files:
            try:
                return await editor.read_text_file(path)
            except FileNotFoundError:
                return None
        from harness_store.safe_read import FILE_MAX_BYTES, read_text  # harness_store: off the startup path

        try:
            # A workspace path: a regular file only, capped, off the event loop (safe_read.py).
            return await anyio.to_thread.run_sync(
                functools.partial(read_text, path, limit=FILE_MAX_BYTES, follow=True)
            )
        except FileNotFoundError:
            return None

    async def read(self, args: dict[str, Any]) -> str:
        """`editor.read(path)`: the file's text (the editor's buffer when it can); FileNotFoundError if none."""
        path = self._path(args)
        text = await self._read(path)
        if text is None:
            raise FileNotFoundError(f"no such file: {path}")
        return text

    async def write(self, args: dict[str, Any]) -> None:
        """`editor.write(path, text)`: replace the file (through the editor when it can) and report a `FileEdited`."""
        path = self._path(args)
        text = args.get("text")
        if not isinstance(text, str):
            raise ValueError("editor.write: `text` must be a string")
        if len(text) > MAX_FILE_CHARS:
            raise ValueError(f"editor.write: {len(text)} characters is over the {MAX_FILE_CHARS} limit")
        try:
            old = await self._read(path)
        except Exception:
            old = None  # a file the editor cannot read (binary, permissions) is still replaced
        editor = self._session.editor
        if editor.can_write_files:
            await editor.write_text_file(path, text)
        else:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        self._session.emit_into_turn(
            ev.FileEdited(cell_id=self._session.current_cell or "", path=path, old_text=old, new_text=text)
        )
