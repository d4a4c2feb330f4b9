"""Gate commands: where they come from, and the ones a project suggests by itself.

A gate is a shell command whose exit status 0 is the evidence that the work is done (a test suite,
a linter, a build). Gates come from three places, merged in this order with duplicates dropped:
the project (`<cwd>/.continual-acp/gates.toml`, committed with the code), the user's config
(`gates = [...]` in config.toml), and the session (`/autonomous gate add`). Autonomous mode never
runs without one: with none configured, `detect_gates` proposes commands the project already
declares, and the user confirms them.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "DEFAULT_GATE_TIMEOUT",
    "DetectedGate",
    "Gate",
    "GateConfigError",
    "detect_gates",
    "load_project_gates",
    "make_gate",
    "merge_gates",
    "parse_gates",
    "project_gates_file",
]

GateSource = Literal["project", "user", "session"]
DEFAULT_GATE_TIMEOUT = 600.0
MAX_COMMAND = 2000


class GateConfigError(ValueError):
    """A gates file or setting that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Gate:
    command: str
    timeout: float = DEFAULT_GATE_TIMEOUT
    source: GateSource = "session"

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "timeout": self.timeout, "source": self.source}


@dataclass(frozen=True)
class DetectedGate:
    command: str
    reason: str  # why this project suggests it ("pyproject.toml configures pytest")


def parse_gates(raw: Any, *, source: GateSource, where: str) -> tuple[Gate, ...]:
    """Gates from a TOML/JSON value: a list of command strings or of `{command, timeout}` tables."""
    if raw is None:
        return ()
    if isinstance(raw, str | Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        raise GateConfigError(f"{where}: gates must be a list of commands, got {type(raw).__name__}")
    gates: list[Gate] = []
    for index, item in enumerate(raw):
        timeout: Any = DEFAULT_GATE_TIMEOUT
        if isinstance(item, Mapping):
            command = item.get("command")
            timeout = item.get("timeout", DEFAULT_GATE_TIMEOUT)
        else:
            command = item
        gates.append(_gate(command, timeout, source=source, where=f"{where} gate {index + 1}"))
    return tuple(gates)


def _gate(command: Any, timeout: Any, *, source: GateSource, where: str) -> Gate:
    if not isinstance(command, str) or not command.strip():
        raise GateConfigError(f"{where}: command must be a non-empty string, got {command!r}")
    if len(command) > MAX_COMMAND or "\0" in command:
        raise GateConfigError(
            f"{where}: command is not a usable shell command (NUL or over {MAX_COMMAND} chars)"
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 86_400:
        raise GateConfigError(f"{where}: timeout must be a number of seconds in (0, 86400], got {timeout!r}")
    return Gate(command=command.strip(), timeout=float(timeout), source=source)


def make_gate(command: str, timeout: float = DEFAULT_GATE_TIMEOUT, *, source: GateSource = "session") -> Gate:
    """One validated gate (for `/autonomous gate add`); raises `GateConfigError`."""
    return _gate(command, timeout, source=source, where="gate")


def project_gates_file(cwd: str | os.PathLike[str]) -> Path:
    return Path(cwd) / ".continual-acp" / "gates.toml"


def load_project_gates(cwd: str | os.PathLike[str], content: bytes | None = None) -> tuple[Gate, ...]:
    """`.continual-acp/gates.toml`: `[[gate]] command = "pytest -q"` tables or `gates = [...]`.

    `content`: the file's bytes as the control-plane guard verified them (what a loop pins), instead
    of the disk as it is now."""
    from harness_store.safe_read import CONFIG_MAX_BYTES, read_bytes

    path = project_gates_file(cwd)
    try:
        # A regular file only, never blocking, capped: the repository shapes this path.
        raw = content if content is not None else read_bytes(path, limit=CONFIG_MAX_BYTES)
        data = tomllib.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise GateConfigError(f"{path}: {exc}") from None
    gates = [*parse_gates(data.get("gate"), source="project", where=str(path))]
    gates += parse_gates(data.get("gates"), source="project", where=str(path))
    return tuple(gates)


def merge_gates(*groups: Iterable[Gate]) -> tuple[Gate, ...]:
    """Concatenate, keeping the first gate of each command."""
    seen: set[str] = set()
    merged: list[Gate] = []
    for group in groups:
        for gate in group:
            if gate.command not in seen:
                seen.add(gate.command)
                merged.append(gate)
    return tuple(merged)


# ---------------------------------------------------------------- detection


def detect_gates(cwd: str | os.PathLike[str]) -> list[DetectedGate]:
    """Commands the project itself declares as its checks, best first (nothing is run)."""
    root = Path(cwd)
    found: list[DetectedGate] = []
    python = _project_python(root)
    pyproject = _read_toml(root / "pyproject.toml")
    if pyproject is not None and "pytest" in json.dumps(pyproject.get("tool", {})):
        found.append(DetectedGate(f"{python} -m pytest -q", "pyproject.toml configures pytest"))
    elif (root / "pytest.ini").is_file() or _has_section(root / "setup.cfg", "tool:pytest"):
        found.append(DetectedGate(f"{python} -m pytest -q", "pytest.ini / setup.cfg configures pytest"))
    elif (root / "tests").is_dir() and any((root / "tests").glob("test_*.py")):
        found.append(DetectedGate(f"{python} -m pytest -q", "tests/ holds test_*.py files"))
    scripts = _package_scripts(root / "package.json")
    test_script = scripts.get("test", "")
    if test_script and "no test specified" not in test_script:
        found.append(DetectedGate("npm test --silent", "package.json has a test script"))
    if "lint" in scripts:
        found.append(DetectedGate("npm run lint --silent", "package.json has a lint script"))
    makefile = next((root / n for n in ("Makefile", "makefile", "GNUmakefile") if (root / n).is_file()), None)
    if makefile is not None and re.search(r"^(test|check)\s*:", _read_text(makefile), re.M):
        target = "test" if re.search(r"^test\s*:", _read_text(makefile), re.M) else "check"
        found.append(DetectedGate(f"make {target}", f"{makefile.name} has a {target} target"))
    if (root / "Cargo.toml").is_file():
        found.append(DetectedGate("cargo test", "Cargo.toml (a Rust crate)"))
    if (root / "go.mod").is_file():
        found.append(DetectedGate("go test ./...", "go.mod (a Go module)"))
    return _dedupe(found)


def _dedupe(found: Sequence[DetectedGate]) -> list[DetectedGate]:
    seen: set[str] = set()
    out = []
    for gate in found:
        if gate.command not in seen:
            seen.add(gate.command)
            out.append(gate)
    return out


def _project_python(root: Path) -> str:
    for rel in (".venv/bin/python", "venv/bin/python", ".venv/Scripts/python.exe"):
        if (root / rel).is_file():
            return rel
    return "python3"


def _read_toml(path: Path) -> dict[str, Any] | None:
    from harness_store.safe_read import CONFIG_MAX_BYTES, read_bytes

    try:
        return tomllib.loads(read_bytes(path, limit=CONFIG_MAX_BYTES, follow=True).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _read_text(path: Path) -> str:
    """A project file detection reads (Makefile, setup.cfg, package.json): regular, capped, never
    blocking (a FIFO named Makefile is skipped); "" when it cannot be read."""
    from harness_store.safe_read import CONFIG_MAX_BYTES, read_bytes

    try:
        return read_bytes(path, limit=CONFIG_MAX_BYTES, follow=True).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _has_section(path: Path, name: str) -> bool:
    return f"[{name}]" in _read_text(path)


def _package_scripts(path: Path) -> dict[str, str]:
    try:
        data = json.loads(_read_text(path) or "{}")
    except ValueError:
        return {}
    scripts = data.get("scripts") if isinstance(data, dict) else None
    if not isinstance(scripts, dict):
        return {}
    return {str(k): str(v) for k, v in scripts.items()}
