"""Agent settings: environment first, then `config.toml`, then defaults.

The environment names are a public contract. Which settings exist, their kinds, bounds, defaults
and variables is `config_table.OPTIONS`; this module reads the file and the environment and builds
the `AgentConfig`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core.config import table as config_table
from agent_core.config.option import ConfigError
from agent_core.kernel.backend import KernelBackend, parse_backend

MODES = config_table.BY_KEY["mode"].choices
REFINE_REVIEW = config_table.BY_KEY["refine_review"].choices
__all__ = [
    "MODES",
    "NO_MODEL_MESSAGE",
    "REFINE_REVIEW",
    "AgentConfig",
    "ConfigError",
    "ConfigFileError",
    "config_path",
    "default_home",
    "load_config",
    "validate_setting",
]


@dataclass
class AgentConfig:
    """Everything the agent needs to know before the first session."""

    home: Path
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    refine_model: str | None = None
    models: tuple[str, ...] = ()  # extra choices for the model picker
    kernel_pool_size: int = 1  # 0 = no warm pool (every session cold-starts its kernel)
    kernel_python: str | None = None
    # Cap on live kernels in this server (sessions past it wait for one to close); 0 = no cap.
    max_kernels: int = 0
    # Start a session's kernel as soon as the session exists (so the first cell does not wait for it);
    # False defers it to the first cell (scripts and tests that may never run one).
    eager_kernel: bool = True
    # A session's kernel idle this long is snapshotted and stopped (kernel/hibernation.py); its next cell
    # revives it. 0 = never on idle (a `max_kernels` cap still hibernates the coldest one).
    kernel_idle_minutes: float = 30.0
    context_window: int = 128_000
    # Output budget. A turn request sends `max_tokens` only when the user configured it
    # (`send_max_tokens`): otherwise the server's own limit for the model applies, because a fixed
    # default would be refused by endpoints whose model allows less (vLLM rejects max_tokens + prompt
    # over the model length; OpenAI rejects values over the model's cap). Either way a truncated
    # answer ends the turn visibly with `max_tokens`. The value is also the cap for budgets agent_core
    # chooses itself (refinement planning).
    max_output_tokens: int = 32_768
    send_max_tokens: bool = False
    max_turn_requests: int = 50
    compact_threshold: float = 0.8  # compact when the context passes this fraction of the window
    keep_recent_turns: int = 2  # user turns kept verbatim by compaction
    max_retries: int = 3  # the openai client's own retry (429, 5xx, connection errors), with backoff
    request_timeout: float = 600.0
    connect_timeout: float = 10.0
    mode: str = "auto"
    refine_review: str = "global_only"
    cell_timeout: float | None = None
    # Per-prompt checkpoints (rewind, fork): how many a session keeps and how many bytes of pickled
    # variables their store may hold; the oldest go first.
    checkpoint_max_count: int = 100
    checkpoint_max_bytes: int = 1024 * 1024 * 1024
    # A `session/prompt` that arrives while a turn runs: `queue` (waits its turn) or `steer` (joins the
    # running turn at its next model request).
    while_busy: str = "queue"
    config_file: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    kernel_backend: KernelBackend = field(default_factory=KernelBackend)  # agent_core/kernel/backend.py
    warnings: tuple[str, ...] = ()  # unknown config.toml keys, each with the closest valid one
    # Where each setting came from ("environment variable X" or the config file's path): errors
    # name the place to fix, not a variable the user never set.
    sources: dict[str, str] = field(default_factory=dict)

    def option(self, key: str) -> Any:
        """A setting kept in `extra` (a feature's, e.g. `mcp_call_timeout`), or its default."""
        return config_table.value(self.extra, key)

    @property
    def sessions_dir(self) -> Path:
        return self.home / "sessions"

    def session_models(self) -> list[str]:
        """The configured models (main, extra choices, refine model), for a session's model picker."""
        models: list[str] = []
        for name in (self.model, *self.models, self.refine_model):
            if name and name not in models:
                models.append(name)
        return models

    def session_defaults(self) -> dict[str, Any]:
        """A fresh session's settings before any change (the session/new answer shows them)."""
        return {"mode": self.mode, "model": self.model, "refine_review": self.refine_review}

    @property
    def model_configured(self) -> bool:
        return bool(self.model)

    @property
    def model_setup_complete(self) -> bool:
        """A model id and a way to reach it: a key, or an endpoint of its own (a local llama.cpp or
        Ollama server needs no key; api.openai.com, the default endpoint, does)."""
        return bool(self.model) and bool(self.api_key or self.base_url)

    def origin(self, key: str) -> str:
        """Where setting `key` was set, for an error to name: the environment variable, the config
        file's line (and whether `continual-acp setup` wrote it), or how to set it when unset."""
        source = self.sources.get(key)
        if source is None:
            env = config_table.BY_KEY[key].env if key in config_table.BY_KEY else None
            also = f" or {env}" if env else ""
            if getattr(self, key, None):
                return f"`{key}` in config.toml{also}"
            return f"{key} is not set (set it in config.toml with `continual-acp setup`{also})"
        if source.startswith("environment variable "):
            return f"{source.removeprefix('environment variable ')} in the server's environment"
        return f"`{key}` in {source}{_line_of(Path(source), key)}"

    def adopt_model_settings(self, fresh: AgentConfig) -> None:
        """Take the model settings `fresh` has (a config read again after `continual-acp setup`
        wrote the file); the ones it lacks stay as they are (the server's environment no longer
        holds the key it started with, see kernel_bridge.environment)."""
        for key in ("model", "base_url", "api_key", "refine_model"):
            value = getattr(fresh, key)
            if value:
                setattr(self, key, value)
        if fresh.models:
            self.models = fresh.models


def _line_of(path: Path, key: str) -> str:
    """`, line N` (and `, written by continual-acp setup`) for `key = ...` in the TOML file."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    by_setup = bool(lines) and lines[0].startswith("# model settings written by `continual-acp setup`")
    suffix = ", written by `continual-acp setup`" if by_setup else ""
    for number, line in enumerate(lines, 1):
        name, sep, _ = line.partition("=")
        if sep and name.strip().strip('"') == key:
            return f", line {number}{suffix}"
    return suffix


def default_home(env: Mapping[str, str]) -> Path:
    if env.get("CONTINUAL_ACP_HOME"):
        return Path(env["CONTINUAL_ACP_HOME"]).expanduser()
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]).expanduser() / "continual-acp"
    return Path(env.get("HOME") or Path.home()) / ".local" / "share" / "continual-acp"


def config_path(env: Mapping[str, str]) -> Path:
    if env.get("CONTINUAL_ACP_CONFIG"):
        return Path(env["CONTINUAL_ACP_CONFIG"]).expanduser()
    base = (
        Path(env["XDG_CONFIG_HOME"])
        if env.get("XDG_CONFIG_HOME")
        else Path(env.get("HOME") or Path.home()) / ".config"
    )
    return base / "continual-acp" / "config.toml"


class ConfigFileError(ConfigError):
    """`config.toml` exists but cannot be read or parsed: never a silent fall back to defaults (a
    broken file's `kernel = "sandbox"` must not become an unconfined local kernel)."""

    def __init__(self, path: Path, problem: str, line: int | None = None) -> None:
        ValueError.__init__(self, f"config file {path} is not usable: {problem}")
        self.key = ""
        self.value = None
        self.source = str(path)
        self.path = path
        self.problem = problem
        self.line = line


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigFileError(path, f"cannot be read: {exc.strerror or exc}") from None
    import tomllib  # only when there is a file: most starts have none, and it costs ~2 ms

    try:
        with fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message names the line and column ("... (at line 2, column 9)").
        found = re.search(r"at line (\d+)", str(exc))
        raise ConfigFileError(path, f"not valid TOML: {exc}", int(found[1]) if found else None) from None
    except OSError as exc:
        raise ConfigFileError(path, f"cannot be read: {exc.strerror or exc}") from None


def validate_setting(key: str, value: Any, source: str) -> Any:
    """The setting's value checked (and normalized) against its row; raises `ConfigError`."""
    return config_table.validate(key, value, source)


def load_config(env: Mapping[str, str] | None = None, *, log_warnings: bool = True) -> AgentConfig:
    """Build the config from `env` (default: `os.environ`) and the optional TOML file.

    Every setting is validated once, here, against `config_table.OPTIONS`: a wrong type or range
    raises `ConfigError` (a `ValueError`) naming the setting, where it came from, the value and
    what is allowed; an unreadable or unparsable file raises `ConfigFileError` naming the file and
    the line. Unknown keys are logged (the key and the closest valid one; not with `log_warnings`
    False) and kept in `warnings`. `logging` is imported only to log one: the early session/new
    answer (agent_core/fresh_session.py) reads the config before the server loads it.
    """
    env = os.environ if env is None else env
    config_table.check_environment(env)
    path = config_path(env)
    values: dict[str, Any] = dict(_read_toml(path))
    sources: dict[str, str] = dict.fromkeys(values, str(path))
    warnings: list[str] = []
    for key in values:
        warning = config_table.unknown_key_warning(key)
        if warning is not None:
            warnings.append(f"{path}: {warning}")
            if log_warnings:
                import logging

                logging.getLogger(__name__).warning("%s", warnings[-1])
    for name, option in config_table.BY_ENV.items():
        raw = env.get(name)
        if not option.key or raw is None or raw == "":
            continue
        values[option.key] = raw
        sources[option.key] = f"environment variable {name}"
    checked = {
        key: validate_setting(key, value, sources.get(key, "config"))
        for key, value in values.items()
        if key in config_table.BY_KEY
    }
    home = Path(str(checked.pop("home"))).expanduser() if checked.get("home") else default_home(env)
    fields = {f for f in AgentConfig.__dataclass_fields__ if f not in _NOT_SETTINGS}
    kwargs = {key: value for key, value in checked.items() if key in fields}
    # Known keys other modules read (`config_table.value`), and unknown ones (warned about above).
    extra = {
        key: checked.get(key, value) for key, value in values.items() if key not in fields and key != "home"
    }
    if "max_output_tokens" in kwargs:
        kwargs["send_max_tokens"] = True
    if "kernel_python" in kwargs:
        _check_interpreter(kwargs["kernel_python"], sources.get("kernel_python", "config"))
    # How backend settings combine (kernel = "gateway" needs gateway_url, ...): a ValueError naming them.
    backend = parse_backend(extra, env)  # takes the kernel backend keys out of `extra`
    return AgentConfig(
        home=home,
        config_file=path,
        extra=extra,
        kernel_backend=backend,
        warnings=tuple(warnings),
        sources={key: sources[key] for key in checked if key in sources},
        **kwargs,
    )


def _check_interpreter(python: str, source: str) -> None:
    """`kernel_python` must name an executable now, at start (not at the first `session/new`). Only
    the file is checked here (cheap); whether it has ipykernel is asked when a session needs one."""
    from kernel_bridge.environment import resolve_interpreter
    from kernel_bridge.errors import InterpreterNotFound

    try:
        resolve_interpreter(python)
    except InterpreterNotFound as exc:
        detail = str(exc).split("; ")[0]
        raise ConfigError(
            "kernel_python",
            python,
            source,
            f"a Python with ipykernel (a path or a command on PATH): {detail}",
        ) from None


_NOT_SETTINGS = frozenset({"home", "extra", "config_file", "kernel_backend", "warnings"})


NO_MODEL_MESSAGE = (
    "No model is configured, so I cannot answer yet. Run `continual-acp setup` in a terminal (it asks "
    "for the endpoint, key and model), or set CONTINUAL_ACP_MODEL to a model id "
    "(for example `gpt-4.1`), OPENAI_BASE_URL to an OpenAI-compatible endpoint if you do not use "
    "api.openai.com (for example `http://localhost:11434/v1` for Ollama), and OPENAI_API_KEY if the "
    "endpoint needs a key - in the environment of the editor that launches continual-acp, or as "
    "`model`, `base_url` and `api_key` in ~/.config/continual-acp/config.toml. Then start a new prompt."
)
