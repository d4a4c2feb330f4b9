"""Every ready editor config launches a server that answers `initialize`, exactly as the editor would.

Each config is parsed the way its editor reads it (JSON with json; Lua and elisp by a targeted
extraction of the command and its arguments), the placeholder path is replaced by this checkout's
virtualenv, and the command is spawned with a real stdio handshake.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CONFIGS = Path(__file__).resolve().parents[2] / "editor-configs"
PLACEHOLDER_BIN = "/ABSOLUTE/PATH/TO/continual-acp/.venv/bin"


@dataclass(frozen=True)
class Launch:
    command: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)


def _lua_strings(body: str) -> list[str]:
    return re.findall(r'"([^"]*)"', body)


def _from_json(path: Path, *keys: str) -> Launch:
    node: Any = json.loads(path.read_text(encoding="utf-8"))
    for key in keys:
        node = node[key]
    return Launch(command=node["command"], args=list(node.get("args", [])), env=dict(node.get("env", {})))


def _zed(path: Path) -> Launch:
    entry = json.loads(path.read_text(encoding="utf-8"))["agent_servers"]["continual-acp"]
    # Current Zed deserializes agent_servers as an internally tagged enum: without the tag it is rejected.
    assert entry["type"] == "custom"
    return _from_json(path, "agent_servers", "continual-acp")


def _codecompanion(path: Path) -> Launch:
    match = re.search(r"commands\s*=\s*\{\s*default\s*=\s*\{([^}]*)\}", path.read_text(encoding="utf-8"))
    assert match, "no `commands = { default = { ... } }` in the CodeCompanion adapter"
    command, *args = _lua_strings(match.group(1))
    return Launch(command=command, args=args)


def _avante(path: Path) -> Launch:
    text = path.read_text(encoding="utf-8")
    command = re.search(r'\bcommand\s*=\s*"([^"]*)"', text)
    args = re.search(r"\bargs\s*=\s*\{([^}]*)\}", text)
    assert command and args, "avante acp_providers entry needs `command` and `args`"
    return Launch(command=command.group(1), args=_lua_strings(args.group(1)))


def _agent_shell(path: Path) -> Launch:
    match = re.search(r"\(defvar\s+continual-acp-command\s+'\(([^)]*)\)", path.read_text(encoding="utf-8"))
    assert match, "no `(defvar continual-acp-command '(...))` in the agent-shell config"
    command, *args = _lua_strings(match.group(1))  # elisp strings use the same double quotes
    return Launch(command=command, args=args)


PARSERS: dict[str, Callable[[Path], Launch]] = {
    "zed/settings.json": _zed,
    "jetbrains/acp.json": lambda p: _from_json(p, "agent_servers", "continual-acp"),
    "vscode/settings.json": lambda p: _from_json(p, "acp.agents", "continual-acp"),
    "neovim/codecompanion.lua": _codecompanion,
    "neovim/avante.lua": _avante,
    "emacs/continual-acp-agent-shell.el": _agent_shell,
}


# Configs that install the agent from the ACP registry: they name the registry entry instead of a
# local command (the entry's own launch line is run against the built wheel in tests/packaging).
REGISTRY_ENTRY = json.loads((CONFIGS.parent / "registry" / "continual-acp" / "agent.json").read_text())
REGISTRY_CONFIGS = ("zed/settings.registry.json", "jetbrains/acp.registry.json")


def test_every_config_file_is_covered_by_a_launch_test() -> None:
    on_disk = {
        str(p.relative_to(CONFIGS)) for p in CONFIGS.rglob("*") if p.is_file() and p.name != "README.md"
    }
    assert on_disk == set(PARSERS) | set(REGISTRY_CONFIGS)


def test_zed_registry_config_names_the_registry_entry() -> None:
    servers = json.loads((CONFIGS / "zed/settings.registry.json").read_text())["agent_servers"]
    # Zed keys a registry agent by its registry id and tags it `registry`; it has no command of its own.
    assert list(servers) == [REGISTRY_ENTRY["id"]]
    entry = servers[REGISTRY_ENTRY["id"]]
    assert entry["type"] == "registry" and "command" not in entry
    assert all(isinstance(v, str) for v in entry["env"].values())


def test_jetbrains_registry_config_runs_the_registry_distribution() -> None:
    (entry,) = json.loads((CONFIGS / "jetbrains/acp.registry.json").read_text())["agent_servers"].values()
    uvx = REGISTRY_ENTRY["distribution"]["uvx"]
    # What an IDE installing the registry entry runs: `uvx <package==version> <args>`.
    assert entry["command"] == "/ABSOLUTE/PATH/TO/uvx"
    assert entry["args"] == [uvx["package"], *uvx["args"]]


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_config_uses_an_absolute_placeholder_path(name: str) -> None:
    launch = PARSERS[name](CONFIGS / name)
    assert launch.command.startswith(PLACEHOLDER_BIN + "/"), launch.command
    assert launch.args == ["serve"]
    # Editors pass `env` verbatim to the process: string to string only (Zed rejects anything else).
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in launch.env.items()), launch.env


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_config_command_answers_initialize(
    name: str, hermetic_env: dict[str, str], spawn_client: Any, tmp_path: Path
) -> None:
    launch = PARSERS[name](CONFIGS / name)
    venv_bin = str(Path(sys.executable).parent)
    command = launch.command.replace(PLACEHOLDER_BIN, venv_bin)
    assert Path(command).is_file(), f"{command} does not exist: is the project installed in this venv?"
    # The editor passes the config's env; the test's hermetic settings (data dir, model) win.
    env = {**hermetic_env, **launch.env}
    env.update({k: hermetic_env[k] for k in ("CONTINUAL_ACP_HOME", "OPENAI_BASE_URL", "OPENAI_API_KEY")})
    client = spawn_client([command, *launch.args], env=env, cwd=tmp_path)
    answer = client.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False},
            "clientInfo": {"name": f"editor-config-test:{name}", "version": "0"},
        },
    )
    assert answer["protocolVersion"] == 1
    assert answer["agentInfo"]["name"] == "continual-acp"
    assert client.close() == 0, client.stderr()
