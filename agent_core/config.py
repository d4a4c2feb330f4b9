"""Agent settings: environment first, then `config.toml`, then defaults.

The environment names are a public contract (editor configs and users set them; docs/architecture.md lists them). The TOML file uses the same settings
in snake_case (`model`, `base_url`, `api_key`, `refine_model`, `home`, `kernel_pool_size`, ...).
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core.kernel_backend import KernelBackend, parse_backend

log = logging.getLogger(__name__)

MODES = ("ask", "auto", "autonomous")
REFINE_REVIEW = ("always", "global_only", "never")

# env var -> (config key, parser)
_ENV: dict[str, tuple[str, type]] = {
    "CONTINUAL_ACP_MODEL": ("model", str),
    "OPENAI_BASE_URL": ("base_url", str),
    "OPENAI_API_KEY": ("api_key", str),
    "CONTINUAL_ACP_REFINE_MODEL": ("refine_model", str),
    "CONTINUAL_ACP_HOME": ("home", str),
    "CONTINUAL_ACP_KERNEL_POOL": ("kernel_pool_size", int),
    "CONTINUAL_ACP_MAX_KERNELS": ("max_kernels", int),
    "CONTINUAL_ACP_EAGER_KERNEL": ("eager_kernel", bool),
    "CONTINUAL_ACP_CONTEXT_WINDOW": ("context_window", int),
    "CONTINUAL_ACP_MAX_OUTPUT_TOKENS": ("max_output_tokens", int),
    "CONTINUAL_ACP_MAX_TURN_REQUESTS": ("max_turn_requests", int),
    "CONTINUAL_ACP_MODE": ("mode", str),
    "CONTINUAL_ACP_ACTION_FORMAT": ("action_format", str),  # text_actions.py (clients)
}


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
    config_file: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    kernel_backend: KernelBackend = field(default_factory=KernelBackend)  # agent_core/kernel_backend.py

    @property
    def sessions_dir(self) -> Path:
        return self.home / "sessions"

    @property
    def model_configured(self) -> bool:
        return bool(self.model)


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


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        # A broken config file must not stop the server; say where and why on stderr (the log).
        log.warning("ignoring %s: %s", path, exc)
        return {}


class ConfigError(ValueError):
    """A setting has a value of the wrong type or out of range; the message names the setting,
    where it came from, the value and what is allowed."""

    def __init__(self, key: str, value: Any, source: str, allowed: str) -> None:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"setting {key} = {shown} (from {source}) is not valid: it must be {allowed}")
        self.key = key
        self.value = value
        self.source = source


# key -> (kind, minimum, maximum, allowed text); kinds: "int", "float", "str", "bool", "models", "choice"
_RULES: dict[str, tuple[str, float | None, float | None, str]] = {
    "model": ("str", None, None, "a model id (a string)"),
    "base_url": ("str", None, None, "a URL (a string)"),
    "api_key": ("str", None, None, "a string"),
    "refine_model": ("str", None, None, "a model id (a string)"),
    "kernel_python": ("str", None, None, "a path or command name (a string)"),
    "models": ("models", None, None, "a list of model ids (strings)"),
    "kernel_pool_size": ("int", 0, None, "a whole number >= 0"),
    "max_kernels": ("int", 0, None, "a whole number >= 0 (0 = no cap)"),
    "eager_kernel": ("bool", None, None, "true or false"),
    "context_window": ("int", 1, None, "a whole number of tokens >= 1"),
    "max_output_tokens": ("int", 1, None, "a whole number of tokens >= 1"),
    "send_max_tokens": ("bool", None, None, "true or false"),
    "max_turn_requests": ("int", 1, None, "a whole number >= 1"),
    "compact_threshold": (
        "float",
        0,
        1,
        "a number greater than 0 and at most 1 (a fraction of the context window)",
    ),
    "keep_recent_turns": ("int", 0, None, "a whole number >= 0"),
    "max_retries": ("int", 0, None, "a whole number >= 0"),
    "request_timeout": ("float", 0, None, "a number of seconds > 0"),
    "connect_timeout": ("float", 0, None, "a number of seconds > 0"),
    "cell_timeout": ("float", 0, None, "a number of seconds > 0 (or leave it unset for no timeout)"),
    "checkpoint_max_count": ("int", 1, None, "a whole number >= 1"),
    "checkpoint_max_bytes": ("int", 0, None, "a whole number of bytes >= 0"),
    "mode": ("choice", None, None, " or ".join(repr(m) for m in MODES)),
    "refine_review": ("choice", None, None, " or ".join(repr(m) for m in REFINE_REVIEW)),
}
_CHOICES: dict[str, tuple[str, ...]] = {"mode": MODES, "refine_review": REFINE_REVIEW}


def _parse_text(kind: str, raw: str) -> Any:
    """An environment variable's text as the setting's kind (raises ValueError)."""
    if kind == "int":
        return int(raw.strip())
    if kind == "float":
        return float(raw.strip())
    if kind == "bool":
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(raw)
    if kind == "models":
        return [part.strip() for part in raw.split(",") if part.strip()]
    return raw


def validate_setting(key: str, value: Any, source: str) -> Any:
    """The setting's value checked (and normalized) against its rule; raises `ConfigError`."""
    rule = _RULES.get(key)
    if rule is None:
        return value
    kind, low, high, allowed = rule
    if isinstance(value, str) and source.startswith("environment") and kind not in ("str", "choice"):
        try:
            value = _parse_text(kind, value)
        except ValueError:
            raise ConfigError(key, value, source, allowed) from None
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(key, value, source, allowed)
        return value
    if kind == "choice":
        if value not in _CHOICES[key]:
            raise ConfigError(key, value, source, allowed)
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(key, value, source, allowed)
        return value
    if kind == "models":
        if not isinstance(value, list | tuple) or not all(isinstance(m, str) and m for m in value):
            raise ConfigError(key, value, source, allowed)
        return tuple(value)
    number_ok = isinstance(value, int) if kind == "int" else isinstance(value, int | float)
    if isinstance(value, bool) or not number_ok or value != value:  # NaN is not a number here
        raise ConfigError(key, value, source, allowed)
    if kind == "float":
        value = float(value)
        if (low is not None and value <= low) or (high is not None and value > high):
            raise ConfigError(key, value, source, allowed)
    elif (low is not None and value < low) or (high is not None and value > high):
        raise ConfigError(key, value, source, allowed)
    return value


def load_config(env: Mapping[str, str] | None = None) -> AgentConfig:
    """Build the config from `env` (default: `os.environ`) and the optional TOML file.

    Every setting is validated once, here: a wrong type or range raises `ConfigError` (a
    `ValueError`) naming the setting, where it came from, the value and what is allowed.
    """
    env = os.environ if env is None else env
    path = config_path(env)
    values: dict[str, Any] = dict(_read_toml(path))
    sources: dict[str, str] = dict.fromkeys(values, str(path))
    for name, (key, _kind) in _ENV.items():
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        values[key] = raw
        sources[key] = f"environment variable {name}"
    home = Path(str(values.pop("home"))).expanduser() if values.get("home") else default_home(env)
    known = {f for f in AgentConfig.__dataclass_fields__ if f not in {"home", "extra", "config_file"}}
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in values.items():
        if key in known:
            kwargs[key] = validate_setting(key, value, sources.get(key, "config"))
        else:
            extra[key] = value
    if "max_output_tokens" in kwargs:
        kwargs["send_max_tokens"] = True
    backend = parse_backend(extra, env)  # takes the kernel backend keys out of `extra`
    config = AgentConfig(home=home, config_file=path, extra=extra, kernel_backend=backend, **kwargs)
    if config.max_output_tokens < 1:
        raise ValueError(f"max_output_tokens must be >= 1, got {config.max_output_tokens}")
    if config.mode not in MODES:
        raise ValueError(f"mode {config.mode!r} is not one of {', '.join(MODES)}")
    if config.refine_review not in REFINE_REVIEW:
        raise ValueError(f"refine_review {config.refine_review!r} is not one of {', '.join(REFINE_REVIEW)}")
    if config.kernel_pool_size < 0:
        raise ValueError(f"kernel_pool_size must be >= 0, got {config.kernel_pool_size}")
    return config


NO_MODEL_MESSAGE = (
    "No model is configured, so I cannot answer yet. Set CONTINUAL_ACP_MODEL to a model id "
    "(for example `gpt-4.1`), OPENAI_BASE_URL to an OpenAI-compatible endpoint if you do not use "
    "api.openai.com (for example `http://localhost:11434/v1` for Ollama), and OPENAI_API_KEY if the "
    "endpoint needs a key - in the environment of the editor that launches continual-acp, or as "
    "`model`, `base_url` and `api_key` in ~/.config/continual-acp/config.toml. Then start a new prompt."
)
