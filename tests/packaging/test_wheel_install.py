"""The wheel is self-sufficient: built from the sdist (itself built from a copy of the repository),
installed with its dependencies into a fresh virtualenv in a temp dir, and run from a directory
outside the repository, it serves ACP, runs the demo (kernel and skills included), serves the review
panel's static files and imports every module it ships.

Dependencies come from a wheelhouse kept between runs (`CONTINUAL_ACP_TEST_WHEELHOUSE`, default
`~/.cache/continual-acp-tests/wheelhouse-<python>`): filled from the package index the first time
(a fresh CI machine), after that the install is offline. pip runs from the test venv into the fresh
venv (`pip --python`), which needs no pip of its own, and compiles no bytecode: seconds, not a minute.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from acp_client import AcpClient, RpcError
from dist_metadata import sdist_problems, wheel_problems

from acp_server import __version__

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# Not copied into the build: what a fresh clone does not have, or what no build reads.
IGNORED = (".git", ".venv", "node_modules", "__pycache__", "*.egg-info", "build", "dist", "*.pyc")
IGNORED += (".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis")
NOT_SHIPPED = ("tests", "benchmarks", "docs", "editor-configs", "registry")
STEP_TIMEOUT_S = 600  # the first fill of the wheelhouse downloads ~30 MB


@dataclass(frozen=True)
class Installed:
    sdist: Path
    wheel: Path
    venv: Path
    run_dir: Path  # the cwd for every command: outside the repository
    env: dict[str, str]

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, env=self.env, cwd=self.run_dir
        )


def _run(argv: list[str], cwd: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done  # type: ignore[no-any-return]


def _repo_packages() -> list[Path]:
    return sorted(p for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name not in NOT_SHIPPED)


def _package_files() -> set[str]:
    """Every file of every top-level package in the repository (what a build must ship)."""
    ignored = shutil.ignore_patterns(*IGNORED)
    found: set[str] = set()
    for package in _repo_packages():
        for directory, dirs, files in os.walk(package):
            skip = ignored(directory, [*dirs, *files])
            dirs[:] = [d for d in dirs if d not in skip]
            found |= {(Path(directory) / f).relative_to(ROOT).as_posix() for f in files if f not in skip}
    return found


def _build(tmp: Path) -> tuple[Path, Path]:
    """sdist from a copy of the repository, then the wheel from the unpacked sdist (as `python -m
    build` does), with the build backend's own PEP 517 hooks."""
    src, out = tmp / "src", tmp / "dist"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*IGNORED))
    out.mkdir()
    hook = "import sys; from setuptools import build_meta as b; print(getattr(b, sys.argv[1])(sys.argv[2]))"
    sdist = out / _run([sys.executable, "-c", hook, "build_sdist", str(out)], src).stdout.split()[-1]
    unpacked = tmp / "unpacked"
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    (source,) = unpacked.iterdir()
    wheel = out / _run([sys.executable, "-c", hook, "build_wheel", str(out)], source).stdout.split()[-1]
    return sdist, wheel


def _wheelhouse() -> Path:
    configured = os.environ.get("CONTINUAL_ACP_TEST_WHEELHOUSE")
    if configured:
        return Path(configured)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "continual-acp-tests" / f"wheelhouse-py{sys.version_info.major}{sys.version_info.minor}"


def _install(wheel: Path, venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    house = _wheelhouse()
    house.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    offline = [*pip, "install", "--no-compile", "--no-index", "--find-links", str(house), str(wheel)]
    with (house / ".lock").open("w") as lock:  # one filler at a time (several checkouts share it)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if subprocess.run(offline, capture_output=True, timeout=STEP_TIMEOUT_S).returncode == 0:
            return
        # First run here, or a dependency the wheelhouse lacks: fetch them from the index.
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(house), str(wheel)], house)
        for ours in house.glob(f"{PROJECT['name'].replace('-', '_')}-*.whl"):
            ours.unlink()  # only dependencies live here: the wheel under test is always the new one
        _run(offline, house)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    try:
        import setuptools
    except ImportError:
        pytest.fail("setuptools>=77 is needed to build: pip install -e '.[test]'")
    major = int(setuptools.__version__.split(".")[0])
    assert major >= 77, (
        f"setuptools {setuptools.__version__} cannot build this project: pip install -e '.[test]'"
    )
    tmp = tmp_path_factory.mktemp("wheel")
    sdist, wheel = _build(tmp)
    venv = tmp / "venv"
    _install(wheel, venv)
    run_dir = tmp / "elsewhere"
    (run_dir / "home").mkdir(parents=True)
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(run_dir / "home"),
        "XDG_CONFIG_HOME": str(run_dir / "home" / ".config"),
        "CONTINUAL_ACP_HOME": str(run_dir / "home" / "data"),
        "CONTINUAL_ACP_KERNEL_POOL": "0",
        "LANG": "C.UTF-8",
    }
    yield Installed(sdist, wheel, venv, run_dir, env)


def test_the_sdist_and_the_wheel_pass_the_index_metadata_checks(installed: Installed) -> None:
    assert sdist_problems(installed.sdist, PROJECT, __version__, README) == []
    assert wheel_problems(installed.wheel, PROJECT, __version__, README) == []


def test_the_metadata_check_can_fail(installed: Installed) -> None:
    wrong = {**PROJECT, "dependencies": [*PROJECT["dependencies"], "left-pad>=1"]}
    problems = wheel_problems(installed.wheel, wrong, __version__, "another readme")
    assert any("left-pad" in p for p in problems) and any("long description" in p for p in problems)
    assert sdist_problems(installed.sdist, PROJECT, "9.9.9", README) != []


def test_the_sdist_and_the_wheel_carry_every_package_and_its_data(installed: Installed) -> None:
    files = _package_files()
    assert {"acp_server/panel/static/panel.js", "skills/harness.py", "acp_server/py.typed"} <= files
    top = installed.sdist.name.removesuffix(".tar.gz")
    with tarfile.open(installed.sdist) as tar:
        in_sdist = {name.removeprefix(f"{top}/") for name in tar.getnames()}
    import zipfile

    with zipfile.ZipFile(installed.wheel) as zf:
        in_wheel = set(zf.namelist())
    assert sorted(files - in_sdist) == []
    assert sorted(files - in_wheel) == []
    assert not [n for n in in_wheel if n.split("/")[0] in NOT_SHIPPED or n.endswith(".pyc")]


def test_every_shipped_module_imports_and_every_subcommand_answers_help(installed: Installed) -> None:
    script = installed.run_dir / "check_imports.py"
    script.write_text(
        "import importlib, io, json, pkgutil, sys, contextlib\n"
        "from importlib import metadata\n"
        "top = metadata.distribution(sys.argv[1]).read_text('top_level.txt').split()\n"
        "mods = []\n"
        "for name in top:\n"
        "    pkg = importlib.import_module(name)\n"
        "    mods.append(pkg.__file__)\n"
        "    for info in pkgutil.walk_packages(pkg.__path__, name + '.'):\n"
        "        if info.name.rsplit('.', 1)[-1] != '__main__':\n"
        "            mods.append(importlib.import_module(info.name).__file__)\n"
        "from acp_server import cli\n"
        "parser = cli._build_parser()\n"
        "subs = sorted(next(a for a in parser._actions if a.dest == 'command').choices)\n"
        "codes = {}\n"
        "for sub in subs:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            codes[sub] = cli.main([sub, '--help'])\n"
        "        except SystemExit as exc:\n"
        "            codes[sub] = exc.code\n"
        "print(json.dumps({'top': top, 'modules': mods, 'help': codes}))\n"
    )
    done = installed.run(installed.bin("python"), str(script), PROJECT["name"])
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert sorted(report["top"]) == sorted(p.name for p in _repo_packages())
    outside = [m for m in report["modules"] if not m.startswith(str(installed.venv))]
    assert outside == [], "modules imported from outside the fresh venv"
    assert len(report["modules"]) > 100
    assert {"serve", "setup", "demo", "doctor", "harness"} <= set(report["help"])
    assert {sub: code for sub, code in report["help"].items() if code not in (0, None)} == {}


def test_version_is_shown_by_the_console_script(installed: Installed) -> None:
    done = installed.run(installed.bin("continual-acp"), "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"continual-acp {__version__}"


def test_the_demo_runs_from_the_fresh_venv_outside_the_repository(installed: Installed) -> None:
    done = installed.run(installed.bin("continual-acp"), "demo", timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "the server exited cleanly" in done.stdout
    assert "Rolled back" in done.stdout  # the harness ran: a refinement was made and undone
    assert str(ROOT) not in done.stdout + done.stderr


def test_the_registry_launch_line_answers_initialize_with_the_terminal_setup(installed: Installed) -> None:
    # What `uvx <package> <args>` runs once the package is installed: the console script named like
    # the package, with the registry entry's args.
    uvx = json.loads((ROOT / "registry" / "continual-acp" / "agent.json").read_text())["distribution"]["uvx"]
    package, pinned = uvx["package"].split("==")
    assert pinned == __version__
    argv = [installed.bin(package), *uvx["args"]]
    client = AcpClient(dict(installed.env), argv=argv, cwd=str(installed.run_dir))
    try:
        answer = client.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {"auth": {"terminal": True}},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        assert answer["agentInfo"]["version"] == __version__
        assert [(m["type"], m["args"]) for m in answer["authMethods"]] == [("terminal", ["setup"])]
        with pytest.raises(RpcError) as info:
            client.request("session/new", {"cwd": str(installed.run_dir), "mcpServers": []})
        assert info.value.code == -32000 and "continual-acp setup" in info.value.message
    finally:
        assert client.close() == 0, client.stderr()


def test_doctor_passes_every_check_in_the_fresh_venv(installed: Installed) -> None:
    from agent_core.testing.scripted_model import ScriptedModelServer, text

    with ScriptedModelServer([], fallback=text("ok")) as model:
        env = {**installed.env, "OPENAI_BASE_URL": model.base_url, "CONTINUAL_ACP_MODEL": "scripted-model"}
        done = subprocess.run(
            [installed.bin("continual-acp"), "doctor"],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
            cwd=installed.run_dir,
        )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "all checks passed" in done.stdout and "an IPython kernel started" in done.stdout


def test_the_review_panel_serves_its_static_files_from_the_wheel(installed: Installed) -> None:
    proc = subprocess.Popen(
        [installed.bin("continual-acp"), "harness", "ui", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=installed.env,
        cwd=installed.run_dir,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the panel prints its URL once it listens
        match = re.search(r"(http://127\.0\.0\.1:\d+)/\S*token=([\w-]+)", line)
        assert match, line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        base, token = match.groups()
        for path in ("/", "/static/panel.js", "/static/panel.css"):
            with urllib.request.urlopen(f"{base}{path}?token={token}", timeout=30) as response:
                assert response.status == 200 and response.read(), path
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0


def test_uvx_runs_the_registry_launch_line_from_the_built_wheel(installed: Installed) -> None:
    # The registry's distribution is uvx: `uvx --from <wheel>` runs the same launch line in an
    # environment uv builds itself (dependencies from the wheelhouse, so it is offline after the first run).
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv is not None, "uv is a test dependency: pip install -e '.[test]'"
    uvx = json.loads((ROOT / "registry" / "continual-acp" / "agent.json").read_text())["distribution"]["uvx"]
    env = {**installed.env, "UV_CACHE_DIR": str(installed.run_dir / "uv-cache"), "UV_NO_CONFIG": "1"}
    argv = [
        uv,
        "tool",
        "run",
        "--no-index",
        "--find-links",
        str(_wheelhouse()),
        "--from",
        str(installed.wheel),
    ]
    argv += [uvx["package"].split("==")[0], *uvx["args"]]
    client = AcpClient(env, argv=argv, cwd=str(installed.run_dir))
    try:
        answer = client.request(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        )
        assert answer["agentInfo"]["version"] == __version__
        assert [m["id"] for m in answer["authMethods"]] == ["continual-acp-setup"]
    finally:
        assert client.close() == 0, client.stderr()
