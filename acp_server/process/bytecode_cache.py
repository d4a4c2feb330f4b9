"""Bytecode for an install that has none and may not write any beside its sources.

An editor launches the console script fresh for every connection. Installed without compiling
(`uv`/`uvx` installs that way unless told `--compile-bytecode`; so does `pip install --no-compile`)
and run where Python may not write `__pycache__` (PYTHONDONTWRITEBYTECODE set, or a read-only
install), every launch compiles every module it imports from source: measured from the installed
wheel here, spawn -> `session/new` took about twice as long as with bytecode
(benchmarks/bench_startup.py, "no bytecode" beside "bytecode").

Only in that case (the environment's other packages uncompiled too, as such an install leaves them:
a prefix applies to every module, so it would hide the bytecode they have) and only for `serve`, the
editor's launch, the process keeps its bytecode in a private directory of its own data home
(`<data home>/bytecode/<implementation tag>/`, 0700, the same trust as the harness stored beside it),
through Python's own `sys.pycache_prefix`: the first launch writes it, later ones read it, and the
install's directories are never written. An install with bytecode, or a process allowed to write
it where Python normally does, is left alone.

Code is read from that directory, so who may write it matters: the same as the global harness beside
it. A sandboxed kernel cannot (bubblewrap mounts the data dir read-only, Landlock grants no write
there) and host calls refuse the data dir on every backend; an unconfined (local) kernel could, as it
could already write the install itself, the user's site-packages or config.toml. The directory must
be a real directory owned by this user and writable by nobody else, or it is not used.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from collections.abc import Mapping
from importlib.util import cache_from_source

__all__ = ["bytecode_dir", "use_private_bytecode_cache"]


def bytecode_dir(env: Mapping[str, str]) -> str:
    """`<data home>/bytecode/<cache tag>`; the data home resolves as `harness_store.paths.data_home`
    does (acp_server may not import harness_store; os.path, not pathlib: this runs before the early
    `initialize` answer, which imports nothing it can avoid)."""
    explicit = env.get("CONTINUAL_ACP_HOME")
    if explicit:
        home = os.path.expanduser(explicit)
    elif env.get("XDG_DATA_HOME"):
        home = os.path.join(os.path.expanduser(env["XDG_DATA_HOME"]), "continual-acp")
    else:
        home = os.path.join(os.path.expanduser("~"), ".local", "share", "continual-acp")
    return os.path.join(home, "bytecode", sys.implementation.cache_tag or "python")


def _dependency_module() -> str | None:
    """A source file of an installed dependency (anyio's), found without importing it."""
    spec = importlib.util.find_spec("anyio")
    return spec.origin if spec is not None else None


def use_private_bytecode_cache(
    env: Mapping[str, str] | None = None,
    *,
    installed_module: str = __file__,
    dependency_module: str | None = None,
) -> str | None:
    """Point this process's bytecode at `bytecode_dir(env)` when the install has none and Python may
    not write it beside the sources; returns that directory, or None when nothing changed.

    `installed_module`: a source file of this install whose bytecode tells whether the install was
    compiled (this module's own file); `dependency_module`: the same for the environment's packages
    (default: anyio's), whose bytecode the prefix would otherwise hide.
    """
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return None  # Python writes bytecode beside the sources (or the user chose where)
    if os.path.exists(cache_from_source(installed_module)):
        return None  # the install was compiled
    # Its dependencies were (an editable or source checkout beside a pip-installed environment): a
    # prefix would hide their bytecode and compile every one of them again, per data home.
    dependency = dependency_module if dependency_module is not None else _dependency_module()
    if dependency is not None and os.path.exists(cache_from_source(dependency)):
        return None
    cache = bytecode_dir(os.environ if env is None else env)
    try:
        os.makedirs(cache, mode=0o700, exist_ok=True)
        found = os.lstat(cache)
    except OSError:
        return None  # no usable data home: compile from source as before
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o022:
        return None  # a symlink, someone else's, or writable by others: code is read from here
    sys.pycache_prefix = cache
    sys.dont_write_bytecode = False
    return cache
