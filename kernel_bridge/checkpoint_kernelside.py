"""Code that runs INSIDE the kernel: per-turn checkpoints of the user's variables.

A checkpoint is a manifest (`ckpt-<label>.json`: name -> content hash) over a store of per-variable
pickles named by their hash (`blobs/<sha256>`), so a value that did not change between two turns is
stored once and, more to the point, not pickled again: a checkpoint of a kernel holding 50 MB that a
turn did not touch costs one pass over the names. "Did not change" is decided without pickling:
the value is the same object as at the last checkpoint, and no cell since then named it (directly,
through an alias bound to the same object, or through a user function or class it called, whose
code names it). A cell this cannot read (a magic that runs other code, `exec`, `globals()`) marks
every value changed.

Loaded by the host next to `_continual_acp_kernel` (kernelside.py), whose pickling rules (caps, skip
reasons, user names) it reuses. Standard library only, plus dill when the kernel's Python has it.
"""

from __future__ import annotations

import ast as _ast
import builtins as _builtins
import hashlib as _hashlib
import json as _json
import os as _os
import re as _re
import stat as _stat
import sys as _sys
import time as _time
import types as _types
from typing import Any

_len = _builtins.len
_isinstance = _builtins.isinstance
_sorted = _builtins.sorted
_str = _builtins.str
_type = _builtins.type
_Exception = _builtins.Exception
_BaseException = _builtins.BaseException
_getattr = _builtins.getattr
_id = _builtins.id

FORMAT = 1
BLOBS = "blobs"
# Magics whose cells cannot rebind or mutate the user's Python values.
_INERT_MAGICS = frozenset(
    {"bash", "sh", "script", "writefile", "time", "timeit", "html", "markdown", "latex"}
)
_MAGIC_CALL = _re.compile(r"run_(?:line|cell)_magic\(\s*['\"](\w+)['\"]")
_OPAQUE_CALLS = frozenset({"exec", "eval", "globals", "vars", "locals", "get_ipython", "__import__"})

# name -> (id of the value, blob hash, bytes, type name) as of the last checkpoint or restore.
_cache: dict[str, tuple[int, str, int, str]] = {}
# name -> (id of the value, why it was not saved): an unchanged value too large or unpicklable for
# the last checkpoint is not tried again (trying means pickling up to the cap, every turn).
_skipped: dict[str, tuple[int, str]] = {}
_dirty: set[str] = set()
_all_dirty = True  # nothing is known until the first checkpoint
_hooked_shell: Any = None
_manifests: list[dict[str, Any]] | None = None  # kept checkpoints, oldest first (read once from disk)


def _base() -> Any:
    return _sys.modules["_continual_acp_kernel"]


def _shell() -> Any:
    return _base()._shell


def _hook() -> None:
    global _hooked_shell
    shell = _shell()
    if _hooked_shell is shell:
        return
    try:
        shell.events.unregister("post_run_cell", _after_cell)
    except ValueError:
        pass
    shell.events.register("post_run_cell", _after_cell)
    _hooked_shell = shell


def _after_cell(result: Any = None) -> None:
    """Note which names the cell that just ran may have changed (never disturbs the cell)."""
    global _all_dirty
    try:
        info = _getattr(result, "info", None)
        raw = _getattr(info, "raw_cell", None)
        names = _mentioned(raw) if _isinstance(raw, _str) else None  # type: ignore[arg-type]
    except _Exception:
        names = None
    if names is None:
        _all_dirty = True
    else:
        _dirty.update(names)


def _mentioned(raw: str) -> set[str] | None:
    """Names a cell's code can reach, or None when that cannot be told from its text."""
    shell = _shell()
    try:
        code = shell.transform_cell(raw)
    except _Exception:
        return None
    for magic in _MAGIC_CALL.findall(code):
        if magic not in _INERT_MAGICS:
            return None
    try:
        tree = _ast.parse(code)
    except SyntaxError:
        return set()  # it did not run
    names: set[str] = set()
    node: Any
    for node in _ast.walk(tree):
        if _isinstance(node, _ast.Name):
            if node.id in _OPAQUE_CALLS and not _MAGIC_CALL.search(code):
                return None
            names.add(node.id)
        elif _isinstance(node, _ast.Global | _ast.Nonlocal):
            names.update(node.names)
    ns = shell.user_ns
    seen: set[int] = set()
    for name in list(names):
        _reach(ns.get(name), names, seen, 0)
    return names


def _reach(value: Any, names: set[str], seen: set[int], depth: int) -> None:
    """Add the global names that a user function (or a user class's methods) can touch."""
    if depth > 8 or _id(value) in seen:
        return
    seen.add(_id(value))
    if _isinstance(value, _types.MethodType):
        value = value.__func__
    if _isinstance(value, _types.FunctionType):
        if _getattr(value, "__module__", None) != "__main__":
            return
        code = value.__code__
        stack = [code]
        while stack:
            current = stack.pop()
            for name in current.co_names:
                if name not in names:
                    names.add(name)
                    _reach(_shell().user_ns.get(name), names, seen, depth + 1)
            stack.extend(c for c in current.co_consts if _isinstance(c, _types.CodeType))
        return
    if _isinstance(value, _type) and _getattr(value, "__module__", None) == "__main__":
        for member in list(vars(value).values()):
            inner = _getattr(member, "__func__", member)
            _reach(inner, names, seen, depth + 1)


def _private_regular(path: str) -> bytes:
    """The bytes of `path`, refused unless it is our own private regular file (unpickling runs code)."""
    fd = _os.open(path, _os.O_RDONLY | _getattr(_os, "O_NOFOLLOW", 0))
    with _os.fdopen(fd, "rb") as handle:
        info = _os.fstat(fd)
        if not _stat.S_ISREG(info.st_mode) or info.st_mode & 0o077:
            raise PermissionError(f"{path} is not a private regular file; not loaded")
        if _getattr(_os, "getuid", None) is not None and info.st_uid != _os.getuid():
            raise PermissionError(f"{path} is owned by another user; not loaded")
        return handle.read()


def _write_fast(path: str, data: bytes) -> None:
    """Write `path` (0600) through a temp file and a rename, without fsync: a checkpoint is a
    convenience, not acknowledged data, and an fsync per turn would cost more than the rest of it.
    A value torn by a crash is caught on restore by its size. Its own write, as it runs inside the
    kernel, which imports nothing of the host's packages."""
    tmp = f"{path}.tmp-{_os.getpid()}"
    fd = _os.open(tmp, _os.O_WRONLY | _os.O_CREAT | _os.O_TRUNC, 0o600)
    try:
        with _os.fdopen(fd, "wb") as handle:
            handle.write(data)
        _os.replace(tmp, path)
    except _BaseException:
        _remove(tmp)
        raise


def _load_manifests(directory: str) -> list[dict[str, Any]]:
    global _manifests
    if _manifests is None:
        found: list[dict[str, Any]] = []
        try:
            listing = _os.listdir(directory)
        except FileNotFoundError:
            listing = []
        for name in listing:
            if name.startswith("ckpt-") and name.endswith(".json"):
                try:
                    data = _json.loads(_private_regular(_os.path.join(directory, name)))
                except _Exception:
                    continue
                if _isinstance(data, dict) and "label" in data:
                    found.append(data)
        found.sort(key=lambda m: (m.get("created", 0), _str(m.get("label"))))
        _manifests = found
    return _manifests


def _unique_bytes(manifests: list[dict[str, Any]]) -> int:
    sizes: dict[str, int] = {}
    for manifest in manifests:
        for info in manifest["saved"].values():
            sizes[info["hash"]] = info["bytes"]
    return sum(sizes.values())


def _remove(path: str) -> None:
    try:
        _os.unlink(path)
    except FileNotFoundError:
        pass


def _prune(directory: str, max_count: int, max_bytes: int, drop: list[str]) -> list[str]:
    """Drop the named checkpoints, then the oldest until within bounds (the newest is always kept)."""
    manifests = _load_manifests(directory)
    dropped: list[str] = []
    unwanted = set(drop)
    for manifest in [m for m in manifests if m["label"] in unwanted]:
        manifests.remove(manifest)
        dropped.append(manifest["label"])
    while _len(manifests) > 1 and (_len(manifests) > max_count or _unique_bytes(manifests) > max_bytes):
        dropped.append(manifests.pop(0)["label"])
    if not dropped:
        return dropped
    for label in dropped:
        _remove(_os.path.join(directory, f"ckpt-{label}.json"))
    referenced = {info["hash"] for m in manifests for info in m["saved"].values()}
    blobs = _os.path.join(directory, BLOBS)
    for name in _os.listdir(blobs) if _os.path.isdir(blobs) else []:
        if name not in referenced:
            _remove(_os.path.join(blobs, name))
    return dropped


def checkpoint(
    directory: str,
    label: str,
    per_variable_cap: int,
    total_cap: int,
    max_count: int,
    max_bytes: int,
    drop: list[str],
) -> str:
    """Record the user's variables as checkpoint `label`; returns a summary as JSON."""
    global _all_dirty, _cache, _skipped
    base = _base()
    _hook()
    kind, pickler = base._pickler()
    ns = _shell().user_ns
    blobs = _os.path.join(directory, BLOBS)
    _os.makedirs(blobs, mode=0o700, exist_ok=True)
    names = base.user_names()
    dirty = set(_dirty)
    if not _all_dirty:
        # An alias (`b = a; b.append(1)`) changes `a` too: dirty spreads over names bound to one object.
        by_object: dict[int, list[str]] = {}
        for name in names:
            by_object.setdefault(_id(ns[name]), []).append(name)
        for group in by_object.values():
            if _len(group) > 1 and any(n in dirty for n in group):
                dirty.update(group)
    saved: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    cache: dict[str, tuple[int, str, int, str]] = {}
    total = reused = pickled = written = 0
    for name in names:
        value = ns[name]
        unchanged = not _all_dirty and name not in dirty
        known = _cache.get(name)
        if known is not None and unchanged and known[0] == _id(value):
            saved[name] = {"hash": known[1], "bytes": known[2], "type": known[3]}
            cache[name] = known
            total += known[2]
            reused += 1
            continue
        refused = _skipped.get(name)
        if refused is not None and unchanged and refused[0] == _id(value):
            skipped[name] = refused[1]
            continue
        reason = base._skip_reason(name, value)
        if reason is not None:
            skipped[name] = reason
            continue
        cap = per_variable_cap if per_variable_cap < total_cap - total else total_cap - total
        buffer = base._CappedBuffer(cap)
        try:
            if kind == "dill":
                pickler.dump(value, buffer, recurse=True)
            else:
                pickler.dump(value, buffer)
        except base._TooLarge:
            skipped[name] = (
                f"over the total snapshot cap of {total_cap} bytes"
                if cap < per_variable_cap
                else f"larger than the per-variable cap of {per_variable_cap} bytes"
            )
            continue
        except _BaseException as exc:
            if _isinstance(exc, KeyboardInterrupt):
                raise
            skipped[name] = f"not picklable: {_type(exc).__name__}: {_str(exc)[:200]}"
            continue
        blob = buffer.getvalue()
        digest = _hashlib.sha256(blob).hexdigest()
        path = _os.path.join(blobs, digest)
        if not _os.path.exists(path):
            _write_fast(path, blob)
            written += _len(blob)
        entry = (_id(value), digest, _len(blob), _type(value).__name__)
        cache[name] = entry
        saved[name] = {"hash": digest, "bytes": entry[2], "type": entry[3]}
        total += entry[2]
        pickled += 1
    manifest = {
        "format": FORMAT,
        "label": label,
        "created": _time.time(),
        "pickler": kind,
        "saved": saved,
        "skipped": skipped,
    }
    text = _json.dumps(manifest, sort_keys=True).encode("utf-8")
    _write_fast(_os.path.join(directory, f"ckpt-{label}.json"), text)
    manifests = _load_manifests(directory)
    manifests[:] = [m for m in manifests if m["label"] != label]
    manifests.append(manifest)
    dropped = _prune(directory, max_count, max_bytes, drop)
    _cache, _all_dirty = cache, False
    _skipped = {name: (_id(ns[name]), reason) for name, reason in skipped.items()}
    _dirty.clear()
    return _json.dumps(
        {
            "label": label,
            "names": _len(saved),
            "reused": reused,
            "pickled": pickled,
            "written": written,
            "bytes": total,
            "skipped": skipped,
            "kept": [m["label"] for m in manifests],
            "dropped": dropped,
            "storeBytes": _unique_bytes(manifests),
        }
    )


def restore_checkpoint(directory: str, label: str) -> str:
    """Make the user's variables those of checkpoint `label`: load what differs, delete what is new.

    Values still the same object as when a checkpoint recorded them with the same content hash, and
    untouched since, stay as they are (no unpickling). Names the checkpoint could not save are left
    alone and reported. Returns {"restored", "unchanged", "removed", "failed", "skipped"} as JSON.
    """
    global _all_dirty, _cache
    base = _base()
    _hook()
    kind, pickler = base._pickler()
    manifest = _json.loads(_private_regular(_os.path.join(directory, f"ckpt-{label}.json")))
    ns = _shell().user_ns
    restored: list[str] = []
    unchanged: list[str] = []
    failed: dict[str, str] = {}
    cache: dict[str, tuple[int, str, int, str]] = {}
    if manifest.get("pickler") == "dill" and kind != "dill":
        raise RuntimeError("this checkpoint was saved with dill, which this kernel's Python lacks")
    for name, info in manifest["saved"].items():
        known = _cache.get(name)
        current = ns.get(name, _cache)  # `_cache` stands for "no such name"
        if (
            known is not None
            and not _all_dirty
            and name not in _dirty
            and known[0] == _id(current)
            and known[1] == info["hash"]
        ):
            unchanged.append(name)
            cache[name] = known
            continue
        try:
            blob = _private_regular(_os.path.join(directory, BLOBS, info["hash"]))
            if _len(blob) != info["bytes"]:
                raise ValueError(f"the saved value is {_len(blob)} bytes, expected {info['bytes']} (torn)")
            value = pickler.loads(blob)
        except _BaseException as exc:
            if _isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            failed[name] = f"{_type(exc).__name__}: {_str(exc)[:200]}"
            continue
        ns[name] = value
        cache[name] = (_id(value), info["hash"], info["bytes"], info["type"])
        restored.append(name)
    skipped = dict(manifest.get("skipped", {}))
    removed = [n for n in base.user_names() if n not in manifest["saved"] and n not in skipped]
    for name in removed:
        del ns[name]
    _cache = cache
    _dirty.clear()
    _dirty.update(failed)
    _dirty.update(skipped)
    _all_dirty = False
    base._last_names = None  # the host hears the new names after the next cell
    return _json.dumps(
        {
            "restored": restored,
            "unchanged": unchanged,
            "removed": removed,
            "failed": failed,
            "skipped": skipped,
        }
    )
