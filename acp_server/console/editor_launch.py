"""How each editor launches this server: the line to paste, and the client versions it was tried with.

`doctor` prints one launch line per editor with this installation's absolute command filled in
(editors started from a desktop launcher do not see the shell's PATH or virtualenv). The ready
configs are in `editor-configs/`; `tested` is the oldest client version a real run was made with
(acpx, toad, Neovim + CodeCompanion, Emacs + agent-shell), `requires` what the client itself
needs; where nothing was run, `tested` says so.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO


@dataclass(frozen=True)
class EditorLaunch:
    editor: str
    config: str  # the file under editor-configs/ ("" when the client takes a command line)
    template: str  # `{cmd}` is the absolute command (quoted where the format needs it)
    tested: str
    requires: str = ""


EDITORS: tuple[EditorLaunch, ...] = (
    EditorLaunch(
        "Zed",
        "zed/settings.json",
        '"agent_servers": {{"continual-acp": {{"type": "custom", "command": "{cmd}", "args": ["serve"]}}}}',
        "not yet driven by a real client here (the launch line follows its documented format)",
        'a Zed release whose agent_servers entries take "type": "custom"',
    ),
    EditorLaunch(
        "JetBrains IDEs",
        "jetbrains/acp.json",
        '~/.jetbrains/acp.json: {{"agent_servers": {{"continual-acp": {{"command": "{cmd}", "args": ["serve"]}}}}}}',
        "not yet driven by a real client here (the launch line follows its documented format)",
        "2025.3 or later (custom ACP agents)",
    ),
    EditorLaunch(
        "ACP registry, in Zed",
        "zed/settings.registry.json",
        '"agent_servers": {{"continual-acp": {{"type": "registry"}}}}',
        "not yet driven by a real client here (the entry follows Zed's registry format)",
        "a Zed release with the ACP registry; the package published there",
    ),
    EditorLaunch(
        "ACP registry, in JetBrains IDEs",
        "jetbrains/acp.registry.json",
        '~/.jetbrains/acp.json: {{"agent_servers": {{"Continual ACP": {{"command": "uvx", "args": ["continual-acp==<version>", "serve"]}}}}}}',
        "not yet driven by a real client here (the launch line is the registry entry's)",
        "uv on PATH; the package published on PyPI",
    ),
    EditorLaunch(
        "VS Code (ACP Client extension)",
        "vscode/settings.json",
        '"acp.agents": {{"continual-acp": {{"command": "{cmd}", "args": ["serve"]}}}}',
        "not yet driven by a real client here (the launch line follows its documented format)",
    ),
    EditorLaunch(
        "Neovim + CodeCompanion.nvim",
        "neovim/codecompanion.lua",
        'commands = {{ default = {{ "{cmd}", "serve" }} }}, opts = {{ verbose_output = true }}',
        "Neovim 0.11 + CodeCompanion.nvim v19.22.0",
        "Neovim >= 0.11",
    ),
    EditorLaunch(
        "Neovim + avante.nvim",
        "neovim/avante.lua",
        'acp_providers = {{ ["continual-acp"] = {{ command = "{cmd}", args = {{ "serve" }} }} }}',
        "not yet driven by a real client here (the launch line follows its documented format)",
    ),
    EditorLaunch(
        "Emacs + agent-shell",
        "emacs/continual-acp-agent-shell.el",
        '(defvar continual-acp-command \'("{cmd}" "serve"))',
        "Emacs 30 + agent-shell 0.63.6 / acp.el 0.14.2",
        "Emacs >= 29.1 (agent-shell's minimum)",
    ),
    EditorLaunch("toad", "", 'toad acp "{cmd} serve"', "toad 0.6.20", "Python >= 3.14 (toad's own)"),
    EditorLaunch("acpx", "", "acpx --agent '{cmd} serve' exec 'hello'", "acpx 0.19.1"),
)


def server_command() -> str:
    """The absolute path of this installation's `continual-acp` (else `python -m acp_server`)."""
    script = Path(sys.executable).parent / "continual-acp"
    if script.is_file():
        return str(script)
    return f"{sys.executable} -m acp_server"


def launch_lines(command: str | None = None) -> list[str]:
    """One line per editor: name, what to paste (with the command filled in), versions tried."""
    cmd = command or server_command()
    lines: list[str] = []
    for entry in EDITORS:
        where = f" (editor-configs/{entry.config})" if entry.config else ""
        needs = f"; needs {entry.requires}" if entry.requires else ""
        lines.append(f"  {entry.editor}{where}: {entry.template.format(cmd=cmd)}")
        lines.append(f"      tested with: {entry.tested}{needs}")
    return lines


def write_launch_lines(out: TextIO) -> None:
    """The doctor's closing section: how to launch this installation from each editor."""
    out.write("launch lines (ready configs in editor-configs/):\n")
    for line in launch_lines():
        out.write(line + "\n")
