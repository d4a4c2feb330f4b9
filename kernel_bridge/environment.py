"""Which Python runs the kernel, and which environment variables it may see."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from kernel_bridge.errors import InterpreterNotFound

# Secrets the model's code must not be able to read unless the user opts in by name. The first four
# are the ones every provider's SDK reads; the rest catch common credentials they miss (AWS_SECRET_ACCESS_KEY,
# *_PASSWORD, *_PRIVATE_KEY) and the bare names (API_KEY, TOKEN, SECRET, ...) that have no prefix.
SECRET_PATTERNS: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "*_API_KEY",
    "*_TOKEN",
    "*_SECRET",
    "*_SECRET_*",
    "*_ACCESS_KEY",
    "*_PASSWORD",
    "*_PRIVATE_KEY",
    "API_KEY",
    "API_KEY_*",
    "*_API_KEY_*",
    "APIKEY",
    "*_APIKEY",
    "TOKEN",
    "ACCESS_TOKEN",
    "SECRET",
    "SECRET_*",
    "PASSWORD",
    "*_PASSWD",
    "PRIVATE_KEY",
    "*_CREDENTIALS",
)

# Set by kernel_bridge itself for the kernel-side host client; never scrubbed.
BRIDGE_ADDRESS_VAR = "CONTINUAL_ACP_BRIDGE"
BRIDGE_TOKEN_VAR = "CONTINUAL_ACP_BRIDGE_TOKEN"


def _venv_candidates(root: Path) -> list[Path]:
    # Windows venvs keep the interpreter in Scripts\python.exe; POSIX ones in bin/python.
    return [
        root / "Scripts" / "python.exe",
        root / "python.exe",
        root / "bin" / "python3",
        root / "bin" / "python",
    ]


def resolve_interpreter(python: str | os.PathLike[str] | None) -> Path:
    """Return the kernel interpreter's path.

    None means this server's own interpreter (it has ipykernel). A directory is taken as a venv or
    Python install root (`bin/python` or Windows `Scripts\\python.exe`). A bare name is looked up on
    PATH. Raises InterpreterNotFound naming the path when nothing usable is there.
    """
    if python is None:
        return Path(sys.executable)
    text = os.fspath(python)
    if not text:
        raise InterpreterNotFound("''", "empty path")
    candidate = Path(text).expanduser()
    if os.sep not in text and (os.altsep is None or os.altsep not in text) and not candidate.exists():
        found = shutil.which(text)
        if found is None:
            raise InterpreterNotFound(text, "not found on PATH")
        return Path(found)
    if candidate.is_dir():
        for option in _venv_candidates(candidate):
            if option.is_file() and os.access(option, os.X_OK):
                return option
        raise InterpreterNotFound(str(candidate), "a directory with no bin/python or Scripts\\python.exe")
    if not candidate.exists():
        raise InterpreterNotFound(str(candidate), "no such file")
    if not os.access(candidate, os.X_OK):
        raise InterpreterNotFound(str(candidate), "not executable")
    return candidate


def is_secret(name: str, keep: Collection[str] = ()) -> bool:
    """True when `name` looks like a credential and the user did not opt in to passing it."""
    if name in keep or name in (BRIDGE_ADDRESS_VAR, BRIDGE_TOKEN_VAR):
        return False
    upper = name.upper()
    return (
        upper in _EXACT
        or upper.startswith(_PREFIXES)
        or upper.endswith(_SUFFIXES)
        or any(part in upper for part in _INFIXES)
    )


def _split_patterns(
    patterns: Sequence[str],
) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """SECRET_PATTERNS as string tests: `X`, `X*`, `*X`, `*X*` mean equal, starts with, ends with,
    contains, exactly as `fnmatch` reads them. Plain string tests, not a compiled pattern: this runs
    on every variable before the first session is answered, where compiling cost a few ms."""
    exact, prefixes, suffixes, infixes = set(), [], [], []
    for pattern in patterns:
        core = pattern.strip("*")
        if "*" in core or any(ch in core for ch in "?[]"):
            raise ValueError(f"secret pattern {pattern!r}: only a leading or trailing * is supported")
        lead, trail = pattern.startswith("*"), pattern.endswith("*") and len(pattern) > 1
        if lead and trail:
            infixes.append(core)
        elif lead:
            suffixes.append(core)
        elif trail:
            prefixes.append(core)
        else:
            exact.add(core)
    return frozenset(exact), tuple(prefixes), tuple(suffixes), tuple(infixes)


_EXACT, _PREFIXES, _SUFFIXES, _INFIXES = _split_patterns(SECRET_PATTERNS)


def drop_secret_environment(keep: Collection[str] = ()) -> list[str]:
    """Remove credential-like variables from this process's own `os.environ`; returns their names.

    Call once the settings have been read (the model key lives on in the config object), so that
    nothing the server starts later inherits them and `/proc/<server>/environ` cannot hand them out
    on platforms where the process cannot be made undumpable. Linux still shows the environment
    the process was started with in `/proc/<pid>/environ`; `hardening.make_undumpable` covers that.
    """
    dropped = [name for name in list(os.environ) if is_secret(name, keep)]
    for name in dropped:
        os.environ.pop(name, None)
    return dropped


def scrub_environment(env: Mapping[str, str], keep: Collection[str] = ()) -> dict[str, str]:
    """A copy of `env` without API keys, tokens and secrets (names in `keep` are passed through)."""
    return {name: value for name, value in env.items() if not is_secret(name, keep)}
