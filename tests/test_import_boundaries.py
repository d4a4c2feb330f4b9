"""Every package imports only what docs/architecture.md allows (arrows point one way)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = {
    "acp_server",
    "agent_core",
    "continual_eval",
    "harness_store",
    "host_base",
    "kernel_bridge",
    "skills",
}

# package -> (project packages it may import, third-party top-level modules it may import)
ALLOWED: dict[str, tuple[set[str], set[str]]] = {
    # The lowest layer (private atomic files, private dirs, pid identity, process groups): stdlib only.
    "host_base": (set(), set()),
    "harness_store": ({"host_base"}, {"pydantic", "pydantic_core", "typing_extensions"}),
    "kernel_bridge": (
        {"host_base"},
        {"jupyter_client", "jupyter_core", "zmq", "dill", "anyio", "IPython", "ipykernel", "aiohttp"},
    ),
    # Kernel-side code: it reaches the host only through kernel_bridge's kernel-side client; it
    # reads skill folders with harness_store.safe_read (stdlib only; the loader ships its source).
    "skills": ({"kernel_bridge", "harness_store"}, {"IPython"}),
    "agent_core": (
        {"harness_store", "host_base", "kernel_bridge"},
        {"openai", "anyio", "pydantic", "httpx", "mcp"},
    ),
    "acp_server": (
        {"agent_core", "host_base"},
        {"acp", "jsonrpcserver", "anyio", "pydantic", "jsonschema", "aiohttp"},
    ),
    # The eval drives the server as a client (a child process over stdio), never by importing it.
    "continual_eval": ({"agent_core", "harness_store", "host_base"}, set()),
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
    # continual_eval/tasks/ holds the eval's task repositories: data it copies, not code of the package.
    data = ROOT / "continual_eval" / "tasks"
    return sorted(
        p
        for p in (ROOT / package).rglob("*.py")
        if "node_modules" not in p.parts and not p.is_relative_to(data)
    )


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


# ---------------------------------------------------------------- no import cycles inside a package

CYCLE_FREE = ("acp_server", "agent_core")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every import that runs; `if TYPE_CHECKING:`
    blocks are annotations only and do not count. Imports inside functions do."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            found.append((base, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports at run time."""
    paths = sorted(p for p in (root / package).rglob("*.py") if "node_modules" not in p.parts)
    modules = {_module_name(p, root): p for p in paths}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for target, names in _runtime_imports(tree, name, path.name == "__init__.py"):
            if target.split(".")[0] != package:
                continue
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one.
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
            edges = submodules if submodules and len(submodules) == len(names) else [target, *submodules]
            graph[name].update(e for e in edges if e in modules and e != name)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return cycles


@pytest.mark.parametrize("package", CYCLE_FREE)
def test_no_import_cycle_inside_the_package(package: str) -> None:
    cycles = import_cycles(import_graph(package))
    assert not cycles, "import cycles (run-time imports; TYPE_CHECKING ones do not count):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_cycle_checker_sees_a_cycle_and_ignores_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    (pkg / "d.py").write_text("from pkg.c import y\n")
    graph = import_graph("pkg", root=tmp_path)
    assert import_cycles(graph) == [["pkg.a", "pkg.b"]]
    assert graph["pkg.c"] == set() and graph["pkg.d"] == {"pkg.c"}


@pytest.mark.parametrize("package", ["acp_server", "agent_core/refinement"])
def test_the_package_readme_names_every_module(package: str) -> None:
    readme = (ROOT / package / "README.md").read_text(encoding="utf-8")
    modules = [
        p.relative_to(ROOT / package).as_posix()
        for p in sorted((ROOT / package).rglob("*.py"))
        if p.name not in ("__init__.py", "__main__.py")
    ]
    missing = [m for m in modules if f"`{m}`" not in readme]
    assert not missing, f"{package}/README.md does not name: {missing}"
