"""Every package imports only what docs/architecture.md allows (arrows point one way)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = {
    "acp_driver",
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
    # The ACP client the demo, the eval and the tests share: standard library only.
    "acp_driver": (set(), set()),
    # The demo (acp_server/console/demo.py) drives the server through the shared client.
    "acp_server": (
        {"agent_core", "acp_driver", "host_base"},
        {"acp", "jsonrpcserver", "anyio", "pydantic", "jsonschema", "aiohttp"},
    ),
    # The eval drives the server as a client (a child process over stdio), never by importing it.
    "continual_eval": ({"acp_driver", "agent_core", "harness_store", "host_base"}, set()),
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

# Every package, annotations included: a module that names another only for the type checker still
# ties the two together (docs/architecture.md), so a Protocol replaces such an import.
CYCLE_FREE = tuple(sorted(PROJECT))


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """(imported module, names taken from it) for every import of the module: at the top, inside
    functions and under `if TYPE_CHECKING:` alike."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            found.append((base, [alias.name for alias in node.names]))
    return found


def import_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (type-only imports included)."""
    data = root / "continual_eval" / "tasks"
    paths = sorted(
        p
        for p in (root / package).rglob("*.py")
        if "node_modules" not in p.parts and not p.is_relative_to(data)
    )
    modules = {_module_name(p, root): p for p in paths}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for target, names in _imports(tree, name, path.name == "__init__.py"):
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
    assert not cycles, "import cycles (TYPE_CHECKING imports count):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_cycle_checker_sees_a_cycle_through_a_type_checking_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\n")
    (pkg / "d.py").write_text("from pkg.c import y\n")
    (pkg / "e.py").write_text("from pkg.d import z\n")
    graph = import_graph("pkg", root=tmp_path)
    assert import_cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
    assert graph["pkg.c"] == {"pkg.d"} and graph["pkg.e"] == {"pkg.d"}


# ---------------------------------------------------------------- acp_server's features see only ports

# The concrete server, editor and presenter, and the modules that may name them (type-only imports
# count): the server's own composition. Every feature annotates the Protocols of acp_server/ports.py.
CONCRETE = {
    "acp_server.sessions.methods": {"acp_server.server"},
    "acp_server.sessions.editor": {"acp_server.sessions.methods"},
    "acp_server.turn.presenter": {"acp_server.sessions.methods", "acp_server.sessions.editor"},
}
# The acp_server modules the ports may name: the method table and the v2 dialect, which import no
# module that uses a port (so the ports stay below every feature).
PORTS = "acp_server.ports"
PORTS_MAY_IMPORT = {"acp_server.protocol.registry", "acp_server.v2.dialect"}


def test_features_import_the_ports_not_the_concrete_server_editor_or_presenter() -> None:
    graph = import_graph("acp_server")
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if target in CONCRETE and module not in CONCRETE[target]
    ]
    assert not wrong, "\n".join(wrong)


def test_the_ports_import_no_feature_module() -> None:
    graph = import_graph("acp_server")
    assert graph[PORTS] <= PORTS_MAY_IMPORT, sorted(graph[PORTS] - PORTS_MAY_IMPORT)
    reached, todo = set(), list(graph[PORTS])
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph[module])
    assert PORTS not in reached, "a module the ports import imports them back"


def _readme_misses(folder: Path, package_root: Path) -> list[str]:
    """The modules directly in `folder`, and its subfolders with Python code, that no README names
    (backticked: `name.py`, `sub/`): the folder's own README.md, or where it has none the nearest
    one above it in the package (as `folder/name.py`, or by its name in the folder's row)."""
    holder = folder
    while not (holder / "README.md").is_file() and holder != package_root:
        holder = holder.parent
    readme = (holder / "README.md").read_text(encoding="utf-8")
    prefix = "" if holder == folder else folder.relative_to(holder).as_posix() + "/"
    names = [p.name for p in sorted(folder.glob("*.py")) if p.name not in ("__init__.py", "__main__.py")]
    names += [f"{d.name}/" for d in sorted(folder.iterdir()) if d.is_dir() and (d / "__init__.py").is_file()]
    return [n for n in names if f"`{prefix}{n}`" not in readme and f"`{n}`" not in readme]


def _code_folders(package: str) -> list[Path]:
    # continual_eval/tasks/ holds the eval's task repositories: data it copies, not the package's code.
    data = ROOT / "continual_eval" / "tasks"
    return [
        d
        for d in sorted((ROOT / package).rglob("*"))
        if d.is_dir()
        and (d / "__init__.py").is_file()
        and "node_modules" not in d.parts
        and not d.is_relative_to(data)
    ]


@pytest.mark.parametrize("package", sorted(PROJECT))
def test_the_package_readme_names_every_module(package: str) -> None:
    """Every module and code folder of the package is named in a README: its folder's own (acp_server's
    README is the map of its folders, each folder's README lists its modules), or for a folder without
    one, the nearest README above it (agent_core's lists its small folders' modules in one table)."""
    root = ROOT / package
    missing = [
        f"{f.relative_to(ROOT)}: no README names {name}"
        for f in [root, *_code_folders(package)]
        for name in _readme_misses(f, root)
    ]
    assert not missing, "\n".join(missing)


def test_the_readme_check_sees_a_module_no_readme_names(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    for name in ("__init__.py", "named.py", "unnamed.py", "sub/__init__.py", "sub/deep.py", "sub/lost.py"):
        (pkg / name).write_text("")
    (pkg / "README.md").write_text("`named.py` `sub/` `sub/deep.py`")
    assert _readme_misses(pkg, pkg) == ["unnamed.py"]
    assert _readme_misses(pkg / "sub", pkg) == ["lost.py"]
