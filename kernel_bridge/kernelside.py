"""Code that runs INSIDE the kernel: session setup, names, snapshot and restore.

kernel_bridge sends this file's source to each kernel and loads it as the private module
``_continual_acp_kernel`` (it must not depend on kernel_bridge being importable there). Standard
library only, plus dill when the kernel's interpreter has it.

The functions are called from cells that run in the user's namespace, where the user may have
shadowed builtins (``list = 3``, ``open = None``). They live in their own module namespace and use
aliases of the builtins captured when the module was loaded, so they keep working.
"""

from __future__ import annotations

import builtins as _builtins
import io as _io
import json as _json
import os as _os
import pickle as _pickle
import socket as _socket
import stat as _stat
import sys as _sys
import time as _time
import types as _types
from typing import Any

# Private aliases: a user who rebinds builtins.open or builtins.len still gets a working snapshot.
_len = _builtins.len
_isinstance = _builtins.isinstance
_sorted = _builtins.sorted
_str = _builtins.str
_type = _builtins.type
_Exception = _builtins.Exception
_BaseException = _builtins.BaseException
_getattr = _builtins.getattr
_hasattr = _builtins.hasattr

FORMAT = 1
_shell: Any = None
_hidden_values: list[Any] = []


class _TooLarge(_Exception):
    pass


class _CappedBuffer:
    """A write-only file that refuses to grow past `cap` bytes (so a 100 MB value is never copied)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.size = 0
        self.parts: list[bytes] = []

    def write(self, data: Any) -> int:
        n = _len(data)
        if self.size + n > self.cap:
            raise _TooLarge()
        self.size += n
        self.parts.append(bytes(data))
        return n

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def _pickler() -> tuple[str, Any]:
    try:
        import dill

        return "dill", dill
    except ImportError:
        return "pickle", _pickle


def setup(shell: Any, config: dict[str, Any]) -> None:
    """Apply the session's cwd, environment and sys.path; make the host client importable."""
    global _shell
    _shell = shell
    for name, value in config.get("env", {}).items():
        if value is None:
            _os.environ.pop(name, None)
        else:
            _os.environ[name] = value
    cwd = config.get("cwd")
    if cwd:
        _os.chdir(cwd)
        if cwd not in _sys.path:
            _sys.path.insert(0, cwd)
    for entry in _builtins.reversed(config.get("sys_path", [])):  # the first entry ends up first
        if entry not in _sys.path:
            _sys.path.insert(0, entry)
    _ensure_hostclient(config.get("hostclient_source", ""))
    events = shell.events
    try:
        events.unregister("post_run_cell", _after_cell)
    except ValueError:
        pass
    events.register("post_run_cell", _after_cell)


_last_names: list[str] | None = None
NAMES_OP = "_kernel_bridge.names"


def _after_cell(result: Any = None) -> None:
    """Tell the host the user's variable names when they change, so a crash report can list them.

    Pushed over the host bridge only on change (most cells define nothing new), which is cheaper
    than asking for names with every execute_request.
    """
    global _last_names
    try:
        names = user_names()
        if names != _last_names:
            from kernel_bridge import hostclient

            hostclient.call(NAMES_OP, names=names)
            _last_names = names
    except _Exception as exc:
        # Best effort (it only feeds the report of lost names): never disturb the user's cell, so
        # the note goes to the kernel's log (its real stderr), not to the cell's output.
        log = _sys.__stderr__
        if log is not None:
            log.write(f"continual-acp: could not send variable names to the host: {exc!r}\n")


def _ensure_hostclient(source: str) -> None:
    try:
        from kernel_bridge import hostclient  # noqa: F401

        return
    except _Exception:
        pass
    # The kernel's interpreter cannot import kernel_bridge (another Python): build the module from source.
    package = _sys.modules.get("kernel_bridge")
    if package is None or not _isinstance(package, _types.ModuleType):
        package = _types.ModuleType("kernel_bridge")
        package.__path__ = []
        _sys.modules["kernel_bridge"] = package
    module = _types.ModuleType("kernel_bridge.hostclient")
    module.__file__ = "<continual-acp hostclient>"
    _sys.modules["kernel_bridge.hostclient"] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    package.hostclient = module  # type: ignore[attr-defined]


def _skip_reason(name: str, value: Any) -> str | None:
    if _isinstance(value, _types.ModuleType) and value.__name__.startswith(
        ("kernel_bridge", "_continual_acp")
    ):
        return "host bridge object (re-created by the session)"
    module = _getattr(_type(value), "__module__", "") or ""
    if module.startswith(("kernel_bridge", "_continual_acp")):
        return "host bridge object (re-created by the session)"
    if _isinstance(value, _io.IOBase):
        return "open file or stream (cannot be saved; reopen it)"
    if _isinstance(value, _socket.socket):
        return "socket (cannot be saved)"
    if _isinstance(value, _types.GeneratorType | _types.CoroutineType | _types.AsyncGeneratorType):
        return f"{_type(value).__name__} (running state cannot be saved)"
    return None


def user_names() -> list[str]:
    """Names of the user's variables (what a snapshot would try to save)."""
    shell = _shell
    if shell is None:
        return []
    hidden = shell.user_ns_hidden
    missing = object()
    # Hidden names (IPython's own `open`, `In`, `exit`...) count once the user rebinds them.
    return _sorted(
        n
        for n, v in shell.user_ns.items()
        if not n.startswith("_") and hidden.get(n, missing) is not v and n not in ("In", "Out")
    )


def _write_private(path: str, write: Any) -> None:
    """Call `write(handle)` on a temp file, then rename it over `path` (mode 0600, atomic).

    Not `host_base.private_files.write_atomic_with`: this runs inside the kernel, which imports
    nothing of the host's packages, and it streams (a snapshot can be as large as the cap)."""
    tmp = f"{path}.tmp-{_os.getpid()}"
    fd = _os.open(tmp, _os.O_WRONLY | _os.O_CREAT | _os.O_TRUNC, 0o600)
    try:
        with _os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            _os.fsync(handle.fileno())
        _os.chmod(tmp, 0o600)
        _os.replace(tmp, path)
    except _BaseException:
        try:
            _os.unlink(tmp)
        except OSError:
            pass
        raise


def snapshot(state_path: str, manifest_path: str, per_variable_cap: int, total_cap: int) -> str:
    """Pickle each user variable separately into one file; returns the manifest as JSON.

    Values that cannot be pickled or exceed a cap are skipped with a reason. The files on disk are
    replaced only after everything is written, so a failure leaves the previous snapshot intact.
    """
    kind, pickler = _pickler()
    ns = _shell.user_ns
    values: dict[str, bytes] = {}
    saved: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    total = 0
    for name in user_names():
        value = ns[name]
        reason = _skip_reason(name, value)
        if reason is not None:
            skipped[name] = reason
            continue
        cap = per_variable_cap if per_variable_cap < total_cap - total else total_cap - total
        buffer = _CappedBuffer(cap)
        try:
            if kind == "dill":
                pickler.dump(value, buffer, recurse=True)
            else:
                pickler.dump(value, buffer)
        except _TooLarge:
            if cap < per_variable_cap:
                skipped[name] = f"over the total snapshot cap of {total_cap} bytes"
            else:
                skipped[name] = f"larger than the per-variable cap of {per_variable_cap} bytes"
            continue
        except _BaseException as exc:  # pickling arbitrary objects can raise anything
            if _isinstance(exc, KeyboardInterrupt):
                raise  # an interrupt aborts the snapshot; the previous one stays on disk
            skipped[name] = f"not picklable: {_type(exc).__name__}: {_str(exc)[:200]}"
            continue
        blob = buffer.getvalue()
        values[name] = blob
        total += _len(blob)
        saved[name] = {"bytes": _len(blob), "type": _type(value).__name__}
    total = _carry_unrestored(kind, values, saved, skipped, total, total_cap)
    created = _time.time()
    manifest = {
        "format": FORMAT,
        "created": created,
        "pickler": kind,
        "python": _sys.version.split()[0],
        "saved": saved,
        "skipped": skipped,
        "total_bytes": total,
    }
    container = {"format": FORMAT, "created": created, "pickler": kind, "values": values, "skipped": skipped}
    # A host on another machine cannot make the directory on this kernel's filesystem.
    _os.makedirs(_os.path.dirname(state_path) or ".", mode=0o700, exist_ok=True)
    # Streamed to the file: a `dumps` first would hold a second copy of up to `total_cap` bytes.
    _write_private(state_path, lambda handle: _pickle.dump(container, handle, _pickle.HIGHEST_PROTOCOL))
    text = _json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
    _write_private(manifest_path, lambda handle: handle.write(text))
    return _json.dumps(manifest)


# Values the last restore could not load (a module that went missing, say), kept as they were
# saved so that the next snapshot does not lose them for good: a later kernel may load them again.
# A name leaves this once the user defines it anew.
_unrestored: dict[str, bytes] = {}
_unrestored_pickler = ""


def _carry_unrestored(
    kind: str,
    values: dict[str, bytes],
    saved: dict[str, dict[str, Any]],
    skipped: dict[str, str],
    total: int,
    total_cap: int,
) -> int:
    """Add the still-unrestored values to a snapshot being built; returns the new total size."""
    for name in _sorted(_unrestored):
        if name in _shell.user_ns:
            del _unrestored[name]
            continue
        blob = _unrestored[name]
        if _unrestored_pickler != kind:
            skipped[name] = (
                f"could not be restored, and was saved with {_unrestored_pickler}, which is missing"
            )
        elif total + _len(blob) > total_cap:
            skipped[name] = f"could not be restored, and is over the total snapshot cap of {total_cap} bytes"
        else:
            values[name] = blob
            total += _len(blob)
            saved[name] = {"bytes": _len(blob), "type": "(not restored; kept from the earlier snapshot)"}
    return total


def restore(state_path: str) -> str:
    """Load each saved name independently; returns {"restored", "failed", "skipped"} as JSON."""
    kind, pickler = _pickler()
    # The host checked the file before asking; check the file actually opened as well, so a
    # symlink or a file swapped in between is never unpickled (unpickling runs code).
    if not _os.path.lexists(state_path):  # asked by a host that cannot see this filesystem
        return _json.dumps({"missing": True, "restored": [], "failed": {}, "skipped": {}})
    fd = _os.open(state_path, _os.O_RDONLY | _getattr(_os, "O_NOFOLLOW", 0))
    with _os.fdopen(fd, "rb") as handle:
        info = _os.fstat(fd)
        if not _stat.S_ISREG(info.st_mode) or info.st_mode & 0o077:
            raise PermissionError(f"{state_path} is not a private regular file; not loaded")
        if _hasattr(_os, "getuid") and info.st_uid != _os.getuid():
            raise PermissionError(f"{state_path} is owned by another user; not loaded")
        container = _pickle.load(handle)
    global _unrestored, _unrestored_pickler
    restored: list[str] = []
    failed: dict[str, str] = {}
    _unrestored, _unrestored_pickler = {}, _str(container.get("pickler", ""))
    if container.get("pickler") == "dill" and kind != "dill":
        failed = dict.fromkeys(container["values"], "dill is not installed in this kernel's Python")
        _unrestored = dict(container["values"])
        return _json.dumps({"restored": [], "failed": failed, "skipped": container.get("skipped", {})})
    for name, blob in container["values"].items():
        try:
            _shell.user_ns[name] = pickler.loads(blob)
        except _BaseException as exc:
            if _isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            failed[name] = f"{_type(exc).__name__}: {_str(exc)[:200]}"
            _unrestored[name] = blob
            continue
        restored.append(name)
    global _last_names
    _last_names = None
    return _json.dumps({"restored": restored, "failed": failed, "skipped": container.get("skipped", {})})
