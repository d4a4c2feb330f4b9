"""Where the data lives: `<home>/harness` (global) and `<home>/sessions/<id>/harness` (local)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from host_base.private_files import private_dir

STATE_FILE = "harness_state.json"
HISTORY_FILE = "refinements.jsonl"
LOCK_FILE = ".harness.lock"
VIEW_DIR = "view"


def data_home(env: Mapping[str, str] | None = None) -> Path:
    """`$CONTINUAL_ACP_HOME`, else `$XDG_DATA_HOME/continual-acp`, else `~/.local/share/continual-acp`."""
    env = os.environ if env is None else env
    explicit = env.get("CONTINUAL_ACP_HOME")
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_DATA_HOME")
    if xdg:
        return Path(xdg).expanduser() / "continual-acp"
    return Path.home() / ".local" / "share" / "continual-acp"


def global_root(home: Path) -> Path:
    """The global store's root under the data home: `<home>/harness`."""
    return home / "harness"


def local_root(home: Path, session_id: str) -> Path:
    """A session's local store root: `<home>/sessions/<id>/harness`."""
    return home / "sessions" / session_id / "harness"


def ensure_dir(path: Path) -> None:
    """Create `path` and any missing parents with mode 0700 (`host_base`'s `private_dir`). Raises OSError."""
    private_dir(path, exact=False)
