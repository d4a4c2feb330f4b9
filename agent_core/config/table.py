"""The one table of settings: every `config.toml` key and every environment variable the product reads.

Each `Option` row (config/option.py) says its key, its environment variable (if any), its kind, bounds
or choices, its default and one line of what it does. Everything else is generated from the rows:

* parsing and validation (`validate`, `from_env`; one value against its row is option.py's `check`):
  `config.load_config` checks every row once, at start, so a bad value is an error naming the key;
  feature modules read a value with `value(extra, key)` instead of parsing it again;
* unknown `config.toml` keys (`unknown_key_warning`: the key and the closest valid one);
* the configuration reference's table (config/reference.py's `markdown_table`);
* the mode and review choices (taken from `settings`, the session settings table, not repeated).

Adding a setting is adding a row (keep the rows of one feature together).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_core.config import session_settings as settings
from agent_core.config.custom_checks import gates_value, verify_skills_value
from agent_core.config.option import LOG_LEVELS, MISSING, ConfigError, Option, check, parse_text
from agent_core.config.referee_defaults import DEFAULT_TEST_PATTERNS

_SECONDS = "a number of seconds > 0"

OPTIONS: tuple[Option, ...] = (
    # the model
    Option("model", "str", "model id", env="CONTINUAL_ACP_MODEL", allowed_text="a model id (a string)"),
    Option(
        "models",
        "strings",
        "extra choices for the model picker",
        default=(),
        env=None,
        allowed_text="a list of model ids (strings)",
    ),
    Option(
        "base_url",
        "str",
        "OpenAI-compatible endpoint",
        env="OPENAI_BASE_URL",
        allowed_text="a URL (a string)",
        default_text="api.openai.com",
    ),
    Option("api_key", "str", "the endpoint's key (never reaches a kernel)", env="OPENAI_API_KEY"),
    Option(
        "refine_model",
        "str",
        "cheaper model for refinement review/planning",
        env="CONTINUAL_ACP_REFINE_MODEL",
        allowed_text="a model id (a string)",
        default_text="the model",
    ),
    Option(
        "context_window",
        "int",
        "context window in tokens",
        default=128_000,
        env="CONTINUAL_ACP_CONTEXT_WINDOW",
        at_least=1,
        allowed_text="a whole number of tokens >= 1",
    ),
    Option(
        "max_output_tokens",
        "int",
        "output budget (sent as `max_tokens` only when set)",
        default=32_768,
        env="CONTINUAL_ACP_MAX_OUTPUT_TOKENS",
        at_least=1,
        allowed_text="a whole number of tokens >= 1",
        default_text="the server's limit",
    ),
    Option("send_max_tokens", "bool", "send `max_tokens` with every request", default=False),
    Option(
        "max_turn_requests",
        "int",
        "model requests per prompt",
        default=50,
        env="CONTINUAL_ACP_MAX_TURN_REQUESTS",
        at_least=1,
    ),
    Option(
        "compact_threshold",
        "float",
        "compact when the context passes this fraction of the window",
        default=0.8,
        above=0,
        at_most=1,
        allowed_text="a number greater than 0 and at most 1 (a fraction of the context window)",
    ),
    Option("keep_recent_turns", "int", "user turns compaction keeps verbatim", default=2, at_least=0),
    Option("max_retries", "int", "client retries (429, 5xx, connection errors)", default=3, at_least=0),
    Option(
        "request_timeout", "float", "model request timeout (s)", default=600.0, above=0, allowed_text=_SECONDS
    ),
    Option(
        "connect_timeout", "float", "model connect timeout (s)", default=10.0, above=0, allowed_text=_SECONDS
    ),
    Option(
        "action_format",
        "choice",
        "how the model acts: native tool calls or fenced python blocks",
        default="auto",
        env="CONTINUAL_ACP_ACTION_FORMAT",
        choices=("auto", "tools", "text"),
    ),
    Option("images", "bool", "send images to the model (else describe them)", default=True),
    # sessions and their settings
    Option(
        "mode",
        "choice",
        "the mode a new session starts in",
        default=settings.MODE.default,
        env="CONTINUAL_ACP_MODE",
        choices=settings.MODES,
    ),
    Option(
        "refine_review",
        "choice",
        "which refinements wait for review",
        default=settings.REFINE_REVIEW.default,
        choices=settings.REVIEW_POLICIES,
    ),
    Option(
        "home",
        "str",
        "data dir",
        env="CONTINUAL_ACP_HOME",
        allowed_text="a path (a string)",
        default_text="`$XDG_DATA_HOME/continual-acp`, else `~/.local/share/continual-acp`",
    ),
    # kernels
    Option(
        "kernel_python",
        "str",
        "the Python that runs kernels (needs ipykernel)",
        allowed_text="a path or command name (a string)",
        default_text="this Python",
    ),
    Option(
        "kernel_pool_size",
        "int",
        "warm kernel pool size (0 = off)",
        default=1,
        env="CONTINUAL_ACP_KERNEL_POOL",
        at_least=0,
    ),
    Option(
        "max_kernels",
        "int",
        "live kernels per server (past it the coldest kernel hibernates; sessions wait only when none may)",
        default=0,
        env="CONTINUAL_ACP_MAX_KERNELS",
        at_least=0,
        allowed_text="a whole number >= 0 (0 = no cap)",
        default_text="0 (no cap)",
    ),
    Option(
        "eager_kernel",
        "bool",
        "start a session's kernel at `session/new` (else at its first cell)",
        default=True,
        env="CONTINUAL_ACP_EAGER_KERNEL",
    ),
    Option(
        "kernel_idle_minutes",
        "float",
        "a kernel idle this long is snapshotted and stopped; its next cell revives it",
        default=30.0,
        env="CONTINUAL_ACP_KERNEL_IDLE_MINUTES",
        at_least=0,
        allowed_text="a number of minutes >= 0 (0 = never hibernate an idle kernel)",
    ),
    Option(
        "cell_timeout",
        "float",
        "interrupt a cell after this many seconds",
        above=0,
        allowed_text="a number of seconds > 0 (or leave it unset for no timeout)",
        default_text="none",
    ),
    # a prompt sent while a turn runs (agent_core/session.py `steer`)
    Option(
        "while_busy",
        "choice",
        "a prompt sent while a turn runs: `queue` waits for it to end, `steer` joins it at its next model request",
        default="queue",
        env="CONTINUAL_ACP_WHILE_BUSY",
        choices=("queue", "steer"),
    ),
    # per-prompt checkpoints (rewind, fork; agent_core/history/prompt_checkpoints.py)
    Option(
        "checkpoint_max_count",
        "int",
        "per-prompt checkpoints a session keeps (oldest dropped first; `/kernel status` shows it)",
        default=100,
        at_least=1,
    ),
    Option(
        "checkpoint_max_bytes",
        "int",
        "bytes of pickled variables a session's checkpoints may hold (oldest dropped first)",
        default=1024 * 1024 * 1024,
        at_least=0,
        default_text="1 GiB",
    ),
    # kernel backends (agent_core/kernel/backend.py checks how they combine)
    Option(
        "kernel",
        "choice",
        "kernel backend",
        default="local",
        env="CONTINUAL_ACP_KERNEL",
        choices=("local", "sandbox", "gateway", "provisioner"),
    ),
    Option("kernel_name", "str", "kernelspec (gateway, provisioner)"),
    Option(
        "kernel_host_transport",
        "choice",
        "how a kernel reaches the server",
        default="auto",
        choices=("auto", "socket", "stdin"),
    ),
    Option("sandbox_network", "bool", "network inside the sandbox", default=False),
    Option(
        "sandbox_tier",
        "choice",
        "sandbox mechanism",
        default="auto",
        choices=("auto", "bubblewrap", "landlock", "none"),
    ),
    Option("gateway_url", "str", "Jupyter Kernel Gateway address", env="CONTINUAL_ACP_GATEWAY_URL"),
    Option("gateway_token", "str", "gateway token", env="CONTINUAL_ACP_GATEWAY_TOKEN"),
    Option("gateway_tls_verify", "bool", "check the gateway's certificate", default=True),
    Option("gateway_ca_bundle", "str", "CA bundle for the gateway (a path)"),
    Option(
        "gateway_env",
        "strings",
        "variables sent to a gateway kernel",
        default=(),
        allowed_text="a list of variable names",
    ),
    Option("gateway_kernel_cwd", "str", "the kernel's cwd on the gateway's side"),
    Option("gateway_snapshot_dir", "str", "snapshot dir on the gateway's side"),
    Option(
        "gateway_timeout",
        "float",
        "gateway request timeout (s)",
        default=60.0,
        above=0,
        allowed_text="a positive number of seconds",
    ),
    # the continual harness
    Option(
        "auto_refine_every", "int", "automatic harness review every N turns (0 = off)", default=25, at_least=0
    ),
    Option(
        "refine_cooldown_seconds",
        "float",
        "least time between automatic reviews (s)",
        default=300.0,
        at_least=0,
    ),
    Option(
        "curate_when_idle_seconds",
        "float",
        "run the curator's pass once the session is idle and quiescent this long (s; 0 = off)",
        default=0.0,
        at_least=0,
    ),
    Option(
        "curate_model_pass",
        "bool",
        "after the curator's deterministic pass, one model request proposes merges (same rules)",
        default=False,
    ),
    Option(
        "refine_verify",
        "choice",
        "replay a proposed fix (with and without the edit, then the gates) before it applies",
        default="off",
        choices=("off", "replay"),
    ),
    Option(
        "verify_skills",
        "custom",
        "check skills in a scratch kernel before they apply",
        default=True,
        check=verify_skills_value,
        allowed_text="true or false, or a table of local/project/global = true|false",
    ),
    Option(
        "skill_check_timeout",
        "float",
        "skill check timeout (s)",
        default=10.0,
        above=0,
        allowed_text=_SECONDS,
    ),
    # autonomous mode
    Option(
        "autonomous_max_continuations", "int", "autonomous continuations per prompt", default=20, at_least=1
    ),
    Option("autonomous_max_tokens", "int", "autonomous token budget", at_least=1, default_text="none"),
    Option("autonomous_max_seconds", "float", "autonomous time budget (s)", at_least=1, default_text="none"),
    Option(
        "autonomous_checkpoint_every",
        "int",
        "refinement checkpoint every N continuations (0 = off)",
        default=5,
        at_least=0,
    ),
    Option(
        "gates",
        "custom",
        "gate commands (also `.continual-acp/gates.toml` in the project)",
        default=None,
        check=gates_value,
        allowed_text='a list of commands (`["pytest -q", ...]`) or {command, timeout} tables',
        default_text="none",
    ),
    # the referee (agent_core/control_plane)
    Option(
        "protected_paths",
        "strings",
        "paths a cell must not change: read-only in the sandbox tiers, elsewhere a change stops an autonomous loop",
        default=(),
        allowed_text="a list of paths (relative to the workspace, or absolute)",
        default_text="none",
    ),
    Option(
        "protect_runner_files",
        "bool",
        "treat files that change what a gate's runner runs as protected paths (conftest.py, pytest.ini, "
        "pyproject.toml, tox.ini, setup.cfg, sitecustomize.py, usercustomize.py, *.pth, a module named "
        "like the runner: pytest.py, pytest/, _pytest/, the gate's `-m` module)",
        default=True,
    ),
    Option(
        "test_patterns",
        "strings",
        "what counts as a test or CI file for a gate pass's tamper evidence",
        default=DEFAULT_TEST_PATTERNS,
        allowed_text="a list of glob patterns over workspace paths",
        default_text="`tests/**`, `test_*.py`, `*_test.*`, `*.spec.*`, `conftest.py`, CI config",
    ),
    Option(
        "control_plane_outside_changes",
        "choice",
        "a change to `.continual-acp/` found at a prompt's start that no server write made (unconfined backends): held for review, or accepted as a person's",
        default="hold",
        choices=("hold", "accept"),
    ),
    # subagents and MCP
    Option("subagents_max_running", "int", "subagents running at once", default=3, at_least=1),
    Option("subagents_max_depth", "int", "subagent nesting depth", default=2, at_least=1),
    Option("subagent_token_budget", "int", "a child's token budget", at_least=1, default_text="none"),
    Option("subagent_max_seconds", "float", "a child's time budget (s)", above=0, default_text="none"),
    Option("mcp_call_timeout", "float", "MCP call timeout (s)", default=60.0, above=0, allowed_text=_SECONDS),
    # environment only
    Option(
        "",
        "str",
        "another config file",
        env="CONTINUAL_ACP_CONFIG",
        allowed_text="a path",
        default_text="`$XDG_CONFIG_HOME/continual-acp/config.toml`, else `~/.config/continual-acp/config.toml`",
    ),
    Option(
        "",
        "choice",
        "log level (stderr)",
        default="WARNING",
        env="CONTINUAL_ACP_LOG_LEVEL",
        choices=LOG_LEVELS,
    ),
    Option(
        "",
        "int",
        "longest JSON-RPC line read from the editor (bytes)",
        default=64 * 1024 * 1024,
        env="CONTINUAL_ACP_MAX_MESSAGE_BYTES",
        at_least=1024,
        default_text="64 MiB",
    ),
    Option(
        "",
        "float",
        "seconds the event loop may go without turning before its stack is logged (stderr)",
        default=10.0,
        env="CONTINUAL_ACP_STALL_SECONDS",
        above=0,
    ),
    Option(
        "",
        "float",
        "seconds a stuck server is given to shut down after its editor left (stdin closed, parent "
        "died) before it kills its process groups and exits",
        default=5.0,
        env="CONTINUAL_ACP_EXIT_GRACE_SECONDS",
        above=0,
    ),
    Option(
        "",
        "str",
        "a directory where the server writes its worst event-loop stall at exit (stall-<pid>.json; "
        "the benchmarks collect them over a whole test run)",
        default="",
        env="CONTINUAL_ACP_STALL_REPORT",
        default_text="none",
    ),
    Option(
        "",
        "choice",
        "ACP version spoken: `2` = the v2 draft, to a client asking for it (docs/protocol.md, ACP v2 draft)",
        default="1",
        env="CONTINUAL_ACP_PROTOCOL",
        choices=("1", "2"),
    ),
    Option("", "str", "the kernel's host bridge address", env="CONTINUAL_ACP_BRIDGE", internal=True),
    Option("", "str", "the kernel's host bridge token", env="CONTINUAL_ACP_BRIDGE_TOKEN", internal=True),
    Option(
        "", "str", "the host bridge over the kernel's stdin", env="CONTINUAL_ACP_BRIDGE_STDIN", internal=True
    ),
)

BY_KEY: Mapping[str, Option] = {option.key: option for option in OPTIONS if option.key}
BY_ENV: Mapping[str, Option] = {option.env: option for option in OPTIONS if option.env}


def validate(key: str, value: Any, source: str) -> Any:
    """A `config.toml` value (or an environment variable's text when `source` says so) checked."""
    option = BY_KEY.get(key)
    if option is None:
        return value
    if isinstance(value, str) and source.startswith("environment") and option.kind not in ("str", "choice"):
        try:
            value = parse_text(option, value)
        except ValueError:
            raise ConfigError(key, value, source, option.allowed) from None
    return check(option, value, source)


def from_env(name: str, env: Mapping[str, str]) -> Any:
    """The environment variable `name` checked against its row (its default when unset or empty)."""
    option = BY_ENV[name]
    raw = env.get(name)
    if raw is None or raw == "":
        return option.default
    source = f"environment variable {name}"
    try:
        parsed = parse_text(option, raw)
    except ValueError:
        raise ConfigError(option.name, raw, source, option.allowed) from None
    return check(option, parsed, source)


def check_environment(env: Mapping[str, str]) -> None:
    """Every environment-only variable checked (those with a key are checked as settings)."""
    for option in OPTIONS:
        if option.env and not option.key and not option.internal:
            from_env(option.env, env)


def value(extra: Mapping[str, Any], key: str) -> Any:
    """The setting `key` from `AgentConfig.extra` (already checked by `load_config`), else its default.

    Checked again here, so a mapping that did not come from `load_config` (a test's, a script's)
    gets the same error instead of a silent fallback.
    """
    option = BY_KEY[key]
    raw = extra.get(key, MISSING)
    if raw is MISSING or raw is None:
        return option.default
    return check(option, raw, "config.toml")


def unknown_key_warning(key: str) -> str | None:
    """None for a known key; else a sentence naming it and the closest valid key."""
    if key in BY_KEY:
        return None
    import difflib

    close = difflib.get_close_matches(key, list(BY_KEY), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(BY_KEY)}"
    return f"unknown setting {key!r}{hint} (it is ignored)"
