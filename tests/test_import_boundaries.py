"""Every package imports only what ARCHITECTURE.md allows (arrows point one way)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = {"acp_server", "agent_core", "harness_store", "kernel_bridge", "skills"}

# package -> (project packages it may import, third-party top-level modules it may import)
ALLOWED: dict[str, tuple[set[str], set[str]]] = {
    "harness_store": (set(), {"pydantic", "pydantic_core", "typing_extensions"}),
    "kernel_bridge": (
        set(),
        {"jupyter_client", "jupyter_core", "zmq", "dill", "anyio", "IPython", "ipykernel", "aiohttp"},
    ),
    # Kernel-side code: it reaches the host only through kernel_bridge's kernel-side client.
    "skills": ({"kernel_bridge"}, {"IPython"}),
    "agent_core": ({"harness_store", "kernel_bridge"}, {"openai", "anyio", "pydantic", "httpx", "mcp"}),
    "acp_server": ({"agent_core"}, {"acp", "jsonrpcserver", "anyio", "pydantic", "jsonschema", "aiohttp"}),
}
# The console script is the composition root: it wires every package's subcommand together.
COMPOSITION_ROOTS = {ROOT / "acp_server" / "cli.py"}


def _imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _files(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "node_modules" not in p.parts)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_architecture_allows(package: str) -> None:
    allowed_project, allowed_third = ALLOWED[package]
    violations: list[str] = []
    for path in _files(package):
        if path in COMPOSITION_ROOTS:
            continue
        for name in _imported_top_levels(path):
            if name == package or name in sys.stdlib_module_names or name == "__future__":
                continue
            if name in PROJECT:
                if name not in allowed_project:
                    violations.append(f"{path.relative_to(ROOT)} imports project package {name}")
            elif name not in allowed_third:
                violations.append(f"{path.relative_to(ROOT)} imports third-party {name}")
    assert not violations, "\n".join(violations)


def test_boundary_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import acp_server.cli\nfrom kernel_bridge import x\n", encoding="utf-8")
    assert _imported_top_levels(bad) == {"acp_server", "kernel_bridge"}


def test_every_package_has_a_readme() -> None:
    missing = [p for p in sorted(ALLOWED) if not (ROOT / p / "README.md").is_file()]
    assert not missing, f"packages without README.md: {missing}"
