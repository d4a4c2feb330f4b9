"""Host-bridge operations behind the kernel's `editor` skill: `editor.read` and `editor.write`.

They go through the editor (`fs/read_text_file` sees unsaved buffers; `fs/write_text_file` lets the
editor show a diff and undo) when the client supports it, else straight to disk. Every write is
reported as a `FileEdited` event (old and new text) in the running turn.

The server performs these calls, not the kernel, so each is first judged by the host-call policy
(`trust/host_call_policy.py`) exactly like a cell's own access on the session's backend; a refusal
is a `PermissionError` the cell sees. The judging and the disk access run in a worker thread (every
path is the workspace's to control: a FIFO or a slow mount must not stop the event loop), and the
disk access opens the path it judged, component by component without following a symlink, so a
swap after the check cannot redirect it.
"""

from __future__ import annotations

import asyncio
import os
import stat
from typing import TYPE_CHECKING, Any, Protocol

from agent_core import events as ev
from agent_core.ports import EditorPort

if TYPE_CHECKING:
    from pathlib import Path

    from agent_core.config.loader import AgentConfig
    from agent_core.trust.host_call_policy import Access, PolicyInputs, Target
    from kernel_bridge import HostBridge
    from kernel_bridge.guarantees import KernelGuarantees

MAX_FILE_CHARS = 10_000_000  # refuse to shuttle files larger than this through the bridge
MAX_FILE_BYTES = 4 * MAX_FILE_CHARS  # the most UTF-8 bytes those characters take

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


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

    def __init__(self, session: EditorOpsHost, policy: PolicyInputs | None = None) -> None:
        self._session = session
        self.policy = policy  # set by `register`; None: every call is refused

    def register(self, host_bridge: HostBridge, policy: PolicyInputs | None = None) -> None:
        """Serve both operations on `host_bridge` (the kernel's), judged by `policy` (the session's
        paths and its kernel's backend)."""
        if policy is not None:
            self.policy = policy
        host_bridge.register("editor.read", self.read)
        host_bridge.register("editor.write", self.write)

    def _path(self, args: dict[str, Any]) -> str:
        path = args.get("path")
        if not isinstance(path, str) or not path or "\x00" in path:
            raise ValueError("editor: `path` must be a non-empty string")
        return path

    async def judge(self, op: str, access: Access, path: str) -> Target:
        """The target `path` names, or PermissionError when the policy refuses it (any host call
        that touches a path asks here: `agents.spawn`'s cwd too)."""
        if self.policy is None:
            raise PermissionError(f"{op}: this session's host-call policy is not set up yet")
        return await asyncio.to_thread(judge, op, access, path, self.policy)

    async def _read(self, target: Target) -> str | None:
        """The current text (the editor's buffer when possible); None if the file does not exist."""
        editor = self._session.editor
        if editor.can_read_files:
            try:
                return await editor.read_text_file(target.requested)
            except FileNotFoundError:
                return None
        return await asyncio.to_thread(read_judged, target)

    async def read(self, args: dict[str, Any]) -> str:
        """`editor.read(path)`: the file's text (the editor's buffer when it can); FileNotFoundError if none."""
        target = await self.judge("editor.read", "read", self._path(args))
        text = await self._read(target)
        if text is None:
            raise FileNotFoundError(f"no such file: {target.requested}")
        return text

    async def write(self, args: dict[str, Any]) -> None:
        """`editor.write(path, text)`: replace the file (through the editor when it can) and report a `FileEdited`."""
        path = self._path(args)
        text = args.get("text")
        if not isinstance(text, str):
            raise ValueError("editor.write: `text` must be a string")
        if len(text) > MAX_FILE_CHARS:
            raise ValueError(f"editor.write: {len(text)} characters is over the {MAX_FILE_CHARS} limit")
        target = await self.judge("editor.write", "write", path)
        try:
            old = await self._read(target)
        except Exception:
            old = None  # a file the editor cannot read (binary, permissions) is still replaced
        editor = self._session.editor
        if editor.can_write_files:
            # The editor keys its buffers by the path as the cell named it (resolved the same way).
            await editor.write_text_file(target.requested, text)
        else:
            await asyncio.to_thread(write_judged, target, text)
        self._session.emit_into_turn(
            ev.FileEdited(
                cell_id=self._session.current_cell or "", path=target.requested, old_text=old, new_text=text
            )
        )


def policy_inputs(
    cwd: str, config: AgentConfig, guarantees: KernelGuarantees, runtime_dir: Path | None
) -> PolicyInputs:
    """What the policy needs of a session whose kernel is ready: its paths, config and backend."""
    from agent_core.control_plane.settings import RefereeSettings
    from agent_core.trust.host_call_policy import PolicyInputs

    return PolicyInputs(
        cwd=cwd,
        home=str(config.home),
        config_file=str(config.config_file) if config.config_file is not None else None,
        protected=RefereeSettings.from_extra(config.extra).protected_paths,
        runtime_dirs=(str(runtime_dir),) if runtime_dir is not None else (),
        backend=guarantees.backend,
        confined=guarantees.confined,
        tier=guarantees.tier,
    )


def judge(op: str, access: Access, path: str, policy: PolicyInputs) -> Target:
    """Resolve `path` and apply the policy (blocking: call in a thread); PermissionError if refused."""
    from agent_core.trust.host_call_policy import build_context, decide, resolve_target

    target = resolve_target(path, policy.cwd)
    decision = decide(op, access, target, build_context(policy))
    if not decision.allowed:
        raise PermissionError(decision.reason)
    return target


def _open_parent(real: str, *, create: bool) -> tuple[int, str]:
    """The directory holding `real`, opened one component at a time without following a symlink
    (the path was resolved, so a symlink met now was swapped in after the check), and the name."""
    head, name = os.path.split(real)
    fd = os.open(os.sep, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for part in [p for p in head.split(os.sep) if p]:
            try:
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o777, dir_fd=fd)
                nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd, name


def _open_judged(target: Target, flags: int, *, create: bool) -> int:
    if os.open not in os.supports_dir_fd:  # no openat here: the final component still unfollowed
        if create:
            os.makedirs(os.path.dirname(target.real), exist_ok=True)
        return os.open(target.real, flags | _NOFOLLOW | _CLOEXEC, 0o666)
    parent, name = _open_parent(target.real, create=create)
    try:
        return os.open(name, flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC, 0o666, dir_fd=parent)
    finally:
        os.close(parent)


def _regular(fd: int, target: Target) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OSError(f"{target.requested} is not a regular file")
    return info


def read_judged(target: Target) -> str | None:
    """The text of the judged file (blocking); None if it does not exist."""
    try:
        fd = _open_judged(target, os.O_RDONLY, create=False)
    except FileNotFoundError:
        return None
    info = _regular(fd, target)
    if info.st_size > MAX_FILE_BYTES:
        os.close(fd)
        raise ValueError(f"editor: {target.requested} is over the {MAX_FILE_BYTES} byte limit")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    # Universal newlines, as a text-mode read gives them.
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def write_judged(target: Target, text: str) -> None:
    """Replace the judged file's text (blocking), creating it and its folders if needed."""
    fd = _open_judged(target, os.O_WRONLY | os.O_CREAT, create=True)
    _regular(fd, target)  # before truncating: a FIFO or device is never written
    with os.fdopen(fd, "wb") as handle:
        handle.truncate(0)
        handle.write(text.encode("utf-8"))
