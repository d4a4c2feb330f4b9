"""An install without bytecode, run where Python may not write it, keeps its bytecode in its data home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from acp_server.process.bytecode_cache import bytecode_dir

# Runs in a child: the switch changes process-wide import state (sys.pycache_prefix).
CHILD = """
import sys
from acp_server.process.bytecode_cache import use_private_bytecode_cache
sys.path.insert(0, sys.argv[1])
print(use_private_bytecode_cache(installed_module=sys.argv[1] + "/probe_module.py", dependency_module=sys.argv[1] + "/probe_dependency.py"))
import probe_module
"""


def _run(tmp_path: Path, **env: str) -> tuple[str, Path]:
    source = tmp_path / "install"
    source.mkdir(exist_ok=True)
    (source / "probe_module.py").write_text("VALUE = 1\n")
    if not (source / "probe_dependency.py").exists():
        (source / "probe_dependency.py").write_text("VALUE = 2\n")
    home = tmp_path / "data"
    run_env = {**os.environ, "CONTINUAL_ACP_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1", **env}
    run_env.pop("PYTHONPYCACHEPREFIX", None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(source)], capture_output=True, text=True, env=run_env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), home


def test_a_launch_without_bytecode_writes_it_under_the_data_home_not_the_install(tmp_path: Path) -> None:
    said, home = _run(tmp_path)
    cache = Path(bytecode_dir({"CONTINUAL_ACP_HOME": str(home)}))
    assert said == str(cache)
    assert list(cache.rglob("probe_module.*.pyc")), "the imported module's bytecode is in the cache"
    assert not (tmp_path / "install" / "__pycache__").exists(), "the install is never written"
    assert cache.stat().st_mode & 0o777 == 0o700


def test_an_install_with_its_bytecode_is_left_alone(tmp_path: Path) -> None:
    source = tmp_path / "install"
    source.mkdir()
    (source / "probe_module.py").write_text("VALUE = 1\n")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(source)], check=True)
    said, home = _run(tmp_path)
    assert said == "None"
    assert not (home / "bytecode").exists()


def test_a_cache_directory_others_can_write_is_not_used(tmp_path: Path) -> None:
    cache = Path(bytecode_dir({"CONTINUAL_ACP_HOME": str(tmp_path / "data")}))
    cache.mkdir(parents=True)
    cache.chmod(0o777)
    said, _home = _run(tmp_path)
    assert said == "None"
    assert not list(cache.rglob("*.pyc"))


def test_an_environment_whose_packages_have_bytecode_is_left_alone(tmp_path: Path) -> None:
    # An editable checkout beside a pip-installed environment: the prefix would hide the packages'
    # bytecode and compile every one of them again for each data home.
    source = tmp_path / "install"
    source.mkdir()
    (source / "probe_dependency.py").write_text("VALUE = 2\n")
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(source / "probe_dependency.py")], check=True
    )
    said, home = _run(tmp_path)
    assert said == "None"
    assert not (home / "bytecode").exists()
