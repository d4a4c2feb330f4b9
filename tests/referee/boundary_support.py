"""The referee's boundary as a plain (non-root) user would meet it: who runs the server, where, on which backend.

A server an editor launches runs as the person at the editor, not as root; a boundary proven only as
root proves little (root reads every /proc/<pid>/environ, ignores file modes, holds capabilities).
This module gives the stdio tests both identities and every kernel backend:

* `identity("root" | "plain")`: the plain one is the system user `continual-acp-test`, created on
  demand when the suite runs as root (a missing user or a failed `useradd` skips, and fails under CI,
  as `system_deps.missing` does for every system dependency).
* `Area`: a directory the identity owns (pytest's tmp_path lives under a root-only 0700 directory)
  holding the server's home (CONTINUAL_ACP_HOME), the config file and the project; removed at the end.
* `python_for(identity)`: an interpreter that identity can run with this checkout's packages. When
  the test interpreter sits where the plain user cannot reach it (pyenv under a 0700 /root), a small
  venv-shaped directory is made under /var/tmp on the system interpreter of the same minor version,
  whose one `.pth` adds this venv's site-packages (cp3XY wheels load on any 3.X.Y).
* `spawn_as(...)`: the real server over real stdio, as that identity (`setpriv`: real and effective
  ids changed, supplementary groups of the user; a root parent's capabilities are dropped by the
  kernel on the uid change), with one backend's config (`backend_config`).
* `MATRIX`: the (user, backend) parameters, ids `root-local` ... `plain-landlock`; `require_backend`
  ends a test whose backend this identity cannot run (a plain user's bubblewrap needs unprivileged
  user namespaces).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from acp_client import AcpClient, server_env
from git_project import GIT_ENV, failing_calc_project
from system_deps import missing

from kernel_bridge.sandbox import probe_bubblewrap, probe_landlock

PLAIN_USER = "continual-acp-test"
USERS = ("root", "plain")
BACKENDS = ("local", "bubblewrap", "landlock")
MATRIX = [pytest.param(user, backend, id=f"{user}-{backend}") for user in USERS for backend in BACKENDS]


@dataclass(frozen=True)
class Identity:
    """Who the server runs as: `name` is "root" or "plain"."""

    name: str
    uid: int
    gid: int

    @property
    def is_root(self) -> bool:
        return self.uid == 0


ROOT = Identity("root", 0, 0)


def _lookup_plain() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(PLAIN_USER)
    except KeyError:
        return None


@cache
def _plain_or_reason() -> Identity | str:
    entry = _lookup_plain()
    if entry is None and os.geteuid() == 0:
        done = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PLAIN_USER],
            capture_output=True,
            text=True,
            check=False,
        )
        entry = _lookup_plain()  # a concurrent run may have made it (useradd then says it exists)
        if entry is None:
            return f"could not create the user {PLAIN_USER}: {done.stderr.strip() or done.returncode}"
    if entry is None:
        return f"no user {PLAIN_USER} and not root to create it"
    if entry.pw_uid == 0:
        return f"{PLAIN_USER} has uid 0"
    if os.geteuid() != 0:
        return "the suite does not run as root, so it cannot start a server as another user"
    return Identity("plain", entry.pw_uid, entry.pw_gid)


def identity(name: str) -> Identity:
    """The identity called `name`; for "plain", ends the test (skip, or fail under CI) if unavailable."""
    if name == "root":
        if os.geteuid() != 0:
            missing("the root identity needs the suite to run as root")
        return ROOT
    found = _plain_or_reason()
    if isinstance(found, str):
        missing(found)
    return found


def as_user(who: Identity) -> list[str]:
    """The argv prefix that runs a command as `who` (empty for root: the suite already is)."""
    if who.is_root:
        return []
    return ["setpriv", f"--reuid={who.uid}", f"--regid={who.gid}", "--init-groups", "--"]


def run_as(who: Identity, argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run `argv` as `who` in `/` (a directory every user may enter), capturing its output."""
    return subprocess.run(
        [*as_user(who), *argv], capture_output=True, text=True, check=False, cwd="/", timeout=timeout
    )


# ---------------------------------------------------------------- the interpreter


def _can_run(who: Identity, python: str, exact: bool) -> bool:
    """Whether `who` runs `python` with this checkout's packages, and can stat its own executable (the
    server checks the kernel interpreter by path); `exact`: the very same Python version as ours."""
    check = "import os, sys, acp_server, kernel_bridge, ipykernel; os.stat(sys.executable)"
    if exact:
        check += f"; assert sys.version_info[:3] == {tuple(sys.version_info[:3])!r}"
    probe = run_as(who, [python, "-c", check])
    return probe.returncode == 0


def _shim(python_dir: Path, system_python: str) -> Path:
    """A venv-shaped directory on `system_python` that sees this venv's packages (see the module doc)."""
    shim = python_dir / "bin" / "python"
    if shim.exists():
        return shim
    python_dir.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=python_dir.name + ".", dir=python_dir.parent))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    site = building / "lib" / f"python{version}" / "site-packages"
    site.mkdir(parents=True)
    (building / "bin").mkdir()
    (building / "bin" / "python").symlink_to(system_python)
    (building / "pyvenv.cfg").write_text(
        f"home = {Path(system_python).parent}\ninclude-system-site-packages = false\nversion = {version}\n"
    )
    ours = sysconfig.get_paths()["purelib"]
    (site / "test-venv.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    for path in [building, *building.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        building.rename(python_dir)  # atomic: a concurrent run that won keeps its own
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return shim


@cache
def _python_or_reason(who: Identity) -> str:
    if who.is_root or _can_run(who, sys.executable, exact=True):
        return sys.executable
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/bin", "/usr/local/bin"):
        candidate = f"{folder}/python{version}"
        if os.access(candidate, os.X_OK):
            key = hashlib.sha256(f"{sysconfig.get_paths()['purelib']}|{candidate}".encode()).hexdigest()[:12]
            shim = _shim(Path("/var/tmp") / f"continual-acp-test-python-{key}", candidate)
            if _can_run(who, str(shim), exact=False):
                return str(shim)
    return ""


def python_for(who: Identity) -> str:
    """An interpreter `who` can run, importing this checkout (see the module doc)."""
    python = _python_or_reason(who)
    if not python:
        missing(f"no Python {sys.version_info.major}.{sys.version_info.minor} the user {PLAIN_USER} can run")
    return python


# ---------------------------------------------------------------- the area the identity owns


@dataclass(frozen=True)
class Area:
    """Directories owned by `who`: the server's home, the project, the config file."""

    who: Identity
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def config(self) -> Path:
        return self.root / "config.toml"


def give(who: Identity, path: Path) -> None:
    """Make `path` (a tree) `who`'s."""
    for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.lchown(item, who.uid, who.gid)


@contextmanager
def area(who: Identity) -> Iterator[Area]:
    """A fresh directory tree owned by `who` (mode 0700), removed afterwards."""
    # Under /var/tmp, not /tmp: the bubblewrap tier gives a kernel a private /tmp, which would hide
    # the data dir from its cells, where a real one (under the user's home) is in plain sight.
    root = Path(tempfile.mkdtemp(prefix=f"continual-acp-boundary-{who.name}-", dir="/var/tmp"))
    try:
        made = Area(who, root)
        made.home.mkdir()
        give(who, root)
        yield made
    finally:
        shutil.rmtree(root, ignore_errors=True)


def calc_project(place: Area, name: str = "work") -> Path:
    """`failing_calc_project` (a git repo, a failing test, a pytest gate) at `<area>/<name>/project`,
    owned by the area's user, whose gate runs an interpreter that user can run."""
    parent = place.root / name
    parent.mkdir()
    repo = failing_calc_project(parent)
    python = python_for(place.who)
    if python != sys.executable:
        gate = f"{python} -m pytest -q -p no:cacheprovider test_calc.py"
        gates = repo / ".continual-acp" / "gates.toml"
        gates.write_text(f"[[gate]]\ncommand = {gate!r}\ntimeout = 120\n")
        env = {**os.environ, **GIT_ENV}
        subprocess.run(
            ["git", "-C", str(repo), "commit", "-qam", "gate"], check=True, capture_output=True, env=env
        )
    give(place.who, parent)
    return repo


# ---------------------------------------------------------------- backends


def backend_config(backend: str, extra: str = "") -> str:
    """The config file text that selects `backend` (`local`, `bubblewrap` or `landlock`)."""
    if backend == "local":
        return 'kernel = "local"\n' + extra
    return f'kernel = "sandbox"\nsandbox_tier = "{backend}"\n' + extra


def backend_env(backend: str) -> dict[str, str]:
    """Environment a backend needs: bwrap is found on PATH."""
    if backend != "bubblewrap":
        return {}
    bwrap = shutil.which("bwrap")
    folder = os.path.dirname(bwrap) if bwrap else ""
    return {"PATH": os.pathsep.join(p for p in (folder, os.environ.get("PATH", "")) if p)}


@cache
def _backend_problem(backend: str, who: Identity) -> str | None:
    if backend == "local":
        return None
    if backend == "landlock":
        probe = probe_landlock()
        return None if probe.ok else f"landlock tier unavailable: {probe.reason}"
    probe = probe_bubblewrap()
    if not probe.ok:
        return f"bubblewrap tier unavailable: {probe.reason}"
    bwrap = shutil.which("bwrap") or "bwrap"
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "true"]
    done = run_as(who, argv, timeout=30)
    if done.returncode != 0:
        return f"bubblewrap as {who.name} (needs unprivileged user namespaces): {done.stderr.strip()}"
    return None


def require_backend(backend: str, who: Identity) -> None:
    """End the test (skip, or fail under CI) if `who` cannot run cells on `backend`."""
    problem = _backend_problem(backend, who)
    if problem is not None:
        missing(problem)


# ---------------------------------------------------------------- the server


def spawn_as(place: Area, backend: str, model_url: str, config_extra: str = "", **env: str) -> AcpClient:
    """The real server over stdio, run as the area's user, in the area, on `backend`."""
    place.config.write_text(backend_config(backend, config_extra))
    give(place.who, place.config)
    python = python_for(place.who)
    argv = [*as_user(place.who), python, "-m", "acp_server"]
    full = server_env(place.home, model_url, CONTINUAL_ACP_CONFIG=str(place.config), **backend_env(backend))
    full.update(env)
    return AcpClient(full, argv=argv, cwd=str(place.root))
