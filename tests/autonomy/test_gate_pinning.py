"""Gate pinning units: the environment a gate runs with, and what a gate command resolves to.

Real files and real interpreters: a throwaway virtualenv (outside any workspace) stands for the
server's own, whose site-packages a cell on the local backend could write.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_core.autonomy.pinning import gate_environment, gate_modules, pin_gate, program_words
from agent_core.autonomy.tamper import TamperWatch, runner_patterns
from agent_core.config.referee_defaults import DEFAULT_RUNNER_FILES
from agent_core.control_plane.settings import RefereeSettings


def _base(tmp_path: Path, workspace: Path) -> dict[str, str]:
    return {
        "PATH": os.pathsep.join(
            ["", ".", "bin", str(workspace / ".venv" / "bin"), str(workspace / "tools"), "/usr/bin", "/bin"]
        ),
        "PYTHONPATH": str(workspace),
        "PYTHONSTARTUP": str(workspace / "startup.py"),
        "PYTHONUSERBASE": str(workspace / "userbase"),
        "PYTHONHOME": str(tmp_path),
        "HOME": str(tmp_path),
    }


def _venv(path: Path) -> Path:
    """A virtualenv at `path` (a python that is a symlink to the real one, with a pyvenv.cfg)."""
    path.mkdir(parents=True)
    subprocess.run(
        [str(Path(sys.base_prefix) / "bin" / "python3"), "-m", "venv", "--without-pip", str(path)],
        check=True,
    )
    return path


def test_a_gate_gets_no_workspace_path_folder_no_code_adding_python_variable_and_a_safe_sys_path(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".venv" / "bin").mkdir(parents=True)
    env = gate_environment(_base(tmp_path, workspace), workspace, "python3 -m pytest -q")
    assert env["PATH"].split(os.pathsep) == ["/usr/bin", "/bin"]
    for name in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONHOME", "VIRTUAL_ENV"):
        assert name not in env, name
    assert env["PYTHONSAFEPATH"] == "1"
    assert env["HOME"] == str(tmp_path)


def test_a_project_virtualenv_is_on_a_gates_path_only_when_its_command_names_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    venv = _venv(workspace / ".venv")
    env = gate_environment(_base(tmp_path, workspace), workspace, ".venv/bin/python -m pytest -q")
    assert env["PATH"].split(os.pathsep) == [str(venv / "bin"), "/usr/bin", "/bin"]
    assert env["VIRTUAL_ENV"] == str(venv)
    unnamed = gate_environment(_base(tmp_path, workspace), workspace, "python -m pytest -q")
    assert str(venv / "bin") not in unnamed["PATH"].split(os.pathsep)


def test_program_words_are_the_first_word_of_each_simple_command() -> None:
    command = "cd sub && FOO=1 ./run.sh --x; env -i make check | tee out.txt"
    assert program_words(command) == ["cd", "./run.sh", "make", "tee"]


def test_gate_modules_are_the_runner_modules_of_python_m() -> None:
    assert gate_modules("python3 -m pytest -q && .venv/bin/python -W error -m mypkg.checks x") == [
        "pytest",
        "mypkg",
    ]
    assert gate_modules("make test") == []
    assert gate_modules("python3 script.py -m notamodule") == []


def test_a_shim_put_earlier_on_the_gates_path_resolves_differently_and_is_named(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    second.mkdir()
    (second / "tool").write_text("#!/bin/sh\nexit 1\n")
    (second / "tool").chmod(0o755)
    env = {"PATH": f"{first}{os.pathsep}{second}"}
    pin = pin_gate("tool --check", tmp_path, env)
    assert [(f.what, f.path) for f in pin.files] == [("program `tool`", str(second / "tool"))]
    first.mkdir()
    (first / "tool").write_text("#!/bin/sh\nexit 0\n")
    (first / "tool").chmod(0o755)
    now = pin_gate("tool --check", tmp_path, env)
    assert pin.differences(now) == [
        (str(first / "tool"), f"program `tool`: now {first / 'tool'} (was {second / 'tool'})")
    ]


def test_a_program_whose_content_changes_in_place_is_reported(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\nexit 1\n")
    tool.chmod(0o755)
    env = {"PATH": str(tool.parent)}
    pin = pin_gate("tool", tmp_path / "bin", env)
    assert pin.differences(pin_gate("tool", tmp_path / "bin", env)) == []
    tool.write_text("#!/bin/sh\nexit 0\n")
    assert pin.differences(pin_gate("tool", tmp_path / "bin", env)) == [
        (str(tool), "program `tool`: content changed")
    ]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _venv(tmp_path_factory.mktemp("pin") / "venv")


def _site(venv: Path) -> Path:
    found = list((venv / "lib").glob("python3*/site-packages"))
    assert len(found) == 1, found
    return found[0]


def test_a_python_gate_pins_its_interpreter_module_and_start_up_files(venv: Path, tmp_path: Path) -> None:
    (venv.parent / "work").mkdir(exist_ok=True)
    workspace = venv.parent / "work"
    env = gate_environment({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, workspace, "x")
    pin = pin_gate(f"{venv}/bin/python -m json.tool --help", workspace, env)
    found = {f.what: f.path for f in pin.files}
    program = f"`{venv}/bin/python`"
    assert found[f"interpreter of {program}"] == os.path.realpath(venv / "bin" / "python")
    assert found[f"module `json.tool` of {program}"] is not None
    assert str(found[f"module `json.tool` of {program}"]).endswith("json/tool.py")
    assert found[f"virtualenv config of {program}"] == str(venv / "pyvenv.cfg")
    assert found[f"sitecustomize of {program}"] is None
    assert str(_site(venv)) in pin.site_dirs


@pytest.mark.parametrize("name", ["sitecustomize.py", "usercustomize.py", "zz.pth"])
def test_a_start_up_file_dropped_in_the_interpreters_site_packages_is_named(
    venv: Path, tmp_path: Path, name: str
) -> None:
    env = gate_environment({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, tmp_path, "x")
    command = f"{venv}/bin/python -m json.tool --help"
    pin = pin_gate(command, tmp_path, env)
    dropped = _site(venv) / name
    dropped.write_text("import os\n")
    try:
        changed = pin.differences(pin_gate(command, tmp_path, env, site_dirs=pin.site_dirs))
    finally:
        dropped.unlink()
    assert str(dropped) in [path for path, _why in changed], changed


def test_a_distribution_with_a_new_plugin_entry_point_in_site_packages_is_named(
    venv: Path, tmp_path: Path
) -> None:
    """pytest loads every installed `pytest11` entry point: a new one is code in the gate's run."""
    env = gate_environment({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, tmp_path, "x")
    command = f"{venv}/bin/python -m json.tool --help"
    pin = pin_gate(command, tmp_path, env)
    info = _site(venv) / "evil-1.0.dist-info"
    info.mkdir()
    points = info / "entry_points.txt"
    points.write_text("[pytest11]\nevil = evil_plugin\n")
    try:
        changed = pin.differences(pin_gate(command, tmp_path, env, site_dirs=pin.site_dirs))
    finally:
        points.unlink()
        info.rmdir()
    assert changed == [(str(points), "entry points: appeared")], changed


def test_a_pth_file_that_forges_the_probes_answer_is_still_named(venv: Path, tmp_path: Path) -> None:
    """The probe's own output cannot be trusted once start-up code runs in it: the server lists the
    pinned site folders itself."""
    env = gate_environment({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, tmp_path, "x")
    command = f"{venv}/bin/python -m json.tool --help"
    pin = pin_gate(command, tmp_path, env)
    forged = '{"executable": null, "module": null, "sitecustomize": null, "usercustomize": null, "site": []}'
    dropped = _site(venv) / "forge.pth"
    dropped.write_text(
        f"import os; print('continual-acp-gate-probe:' + {forged!r}, flush=True); os._exit(0)\n"
    )
    try:
        changed = pin.differences(pin_gate(command, tmp_path, env, site_dirs=pin.site_dirs))
    finally:
        dropped.unlink()
    assert str(dropped) in [path for path, _why in changed], changed


def _git_repo(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("build/\nconftest.py\n")
    (root / "app.py").write_text("VALUE = 1\n")


def test_runner_files_are_protected_by_default_even_when_git_ignores_them(tmp_path: Path) -> None:
    _git_repo(tmp_path)
    shadowing = runner_patterns(DEFAULT_RUNNER_FILES, gate_modules("python3 -m mytool"))
    watch = TamperWatch.start(tmp_path, patterns=(), gates=(), protected=(), shadowing=shadowing)
    (tmp_path / "conftest.py").write_text("def pytest_collection_modifyitems(items):\n    items.clear()\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "sitecustomize.py").write_text("x = 1\n")
    (tmp_path / "mytool.py").write_text("raise SystemExit(0)\n")
    (tmp_path / "app.py").write_text("VALUE = 2\n")
    evidence = watch.changes()
    assert sorted(c.path for c in evidence.protected) == ["conftest.py", "mytool.py", "pkg/sitecustomize.py"]
    assert [c.path for c in evidence.changed if c.why != "protected"] == []


def test_runner_files_are_on_by_default_and_protect_runner_files_false_turns_the_list_off() -> None:
    assert RefereeSettings.from_extra({}).runner_files == DEFAULT_RUNNER_FILES
    assert "conftest.py" in DEFAULT_RUNNER_FILES and "*.pth" in DEFAULT_RUNNER_FILES
    off = RefereeSettings.from_extra({"protect_runner_files": False})
    assert off.runner_files == () and off.errors == ()


def _install_runner(site: Path) -> Path:
    """A distribution `mytool` whose code lives in `_mytool/` (as pytest's lives in `_pytest/`)."""
    (site / "mytool").mkdir()
    (site / "mytool" / "__init__.py").write_text("from _mytool.core import main\n")
    (site / "mytool" / "__main__.py").write_text("from _mytool.core import main\nmain()\n")
    (site / "_mytool").mkdir()
    (site / "_mytool" / "__init__.py").write_text("")
    core = site / "_mytool" / "core.py"
    core.write_text("def main():\n    raise SystemExit(1)\n")
    info = site / "mytool-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mytool\nVersion: 1.0\n")
    record = ["mytool/__init__.py,,", "mytool/__main__.py,,", "_mytool/__init__.py,,", "_mytool/core.py,,"]
    # A file it installs outside site-packages (as an editable install's source is).
    source = site.parents[3] / "src" / "extra.py"
    source.parent.mkdir()
    source.write_text("X = 1\n")
    record.append(os.path.relpath(source, site) + ",,")
    (info / "RECORD").write_text("\n".join([*record, "mytool-1.0.dist-info/RECORD,,"]) + "\n")
    return core


def test_an_edit_to_any_python_file_or_cached_bytecode_of_the_runners_distribution_is_named(
    tmp_path: Path,
) -> None:
    venv = _venv(tmp_path / "venv")
    core = _install_runner(_site(venv))
    subprocess.run([str(venv / "bin" / "python"), "-m", "compileall", "-q", str(core)], check=True)
    cached = next((core.parent / "__pycache__").glob("core.*.pyc"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = gate_environment({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, workspace, "x")
    command = f"{venv}/bin/python -m mytool"
    pin = pin_gate(command, workspace, env)
    assert pin.differences(pin_gate(command, workspace, env, site_dirs=pin.site_dirs)) == []
    core.write_text("def main():\n    raise SystemExit(0)\n")
    assert pin.differences(pin_gate(command, workspace, env, site_dirs=pin.site_dirs)) == [
        (str(core), "runner file: content changed")
    ]
    core.write_text("def main():\n    raise SystemExit(1)\n")
    cached.write_bytes(cached.read_bytes()[:16] + b"poisoned")
    assert pin.differences(pin_gate(command, workspace, env, site_dirs=pin.site_dirs)) == [
        (str(cached), "runner bytecode: content changed")
    ]
    # With the workspace around the virtualenv (a project `.venv`), its site-packages is still pinned,
    # but the distribution's file in the workspace's own source is project code (the tamper watch's).
    source = tmp_path / "src" / "extra.py"
    outside = {f.path for f in pin.files if f.what.startswith("runner file")}
    inside = {f.path for f in pin_gate(command, tmp_path, env).files if f.what.startswith("runner file")}
    assert str(core) in inside and str(source) in outside and inside == outside - {str(source)}
