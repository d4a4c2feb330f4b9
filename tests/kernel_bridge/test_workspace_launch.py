"""The launch seam for workspace code, and the server's safe git: what a started program can see.

Real processes: a child reports its environment, its descriptors and its /proc/self/status; a real
git repository whose config names programs (fsmonitor, a filter, a textconv, an alias) that would
record that they ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_bridge_support import wait_until
from system_deps import requires

from kernel_bridge import group_watch, workspace_launch
from kernel_bridge.safe_git import run_git
from kernel_bridge.sandbox import SandboxLauncher, probe_bubblewrap, probe_landlock

pytestmark = pytest.mark.anyio

_BWRAP = probe_bubblewrap()
_LANDLOCK = probe_landlock()
as_root_with_capabilities = pytest.mark.skipif(
    not group_watch.holds_capabilities(), reason="this process holds no capability to drop"
)

# What the child reports: its environment, the descriptors it holds, its capability lines.
_REPORT = """
import json, os, sys
status = {}
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"):
        status[key] = value.strip()
probe = int(sys.argv[1]) if len(sys.argv) > 1 else -1
try:
    os.fstat(probe)
    inherited = True
except OSError:
    inherited = False
fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
print(json.dumps({"env": dict(os.environ), "status": status, "inherited": inherited, "fds": fds}))
"""


@pytest.fixture
def leaky_fd(tmp_path: Path) -> Iterator[int]:
    """A descriptor this process opened inheritable (no O_CLOEXEC), as a careless library might."""
    fd = os.open(tmp_path / "secret.txt", os.O_RDWR | os.O_CREAT, 0o600)
    os.set_inheritable(fd, True)
    yield fd
    os.close(fd)


def _server_like_env() -> dict[str, str]:
    return {
        **os.environ,
        "OPENAI_API_KEY": "test-key",
        "ANTHROPIC_API_KEY": "test-key-2",
        "CONTINUAL_ACP_GATEWAY_URL": "https://user:pw@gateway.invalid",
        "CONTINUAL_ACP_CONFIG": "/etc/continual-acp.toml",
        "JPY_PARENT_PID": "1",
        "SEAM_ORDINARY": "kept",
    }


def _report(out: bytes) -> dict[str, object]:
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


def test_a_program_run_through_the_seam_sees_no_secret_no_server_setting_and_no_inherited_fd(
    tmp_path: Path, leaky_fd: int
) -> None:
    with workspace_launch.policy(tmp_path, _server_like_env(), confine=False) as launch:
        done = workspace_launch.run([sys.executable, "-c", _REPORT, str(leaky_fd)], launch, timeout=60)
    assert done.returncode == 0, done.stderr
    report = _report(done.stdout)
    env = report["env"]
    assert isinstance(env, dict)
    assert env["SEAM_ORDINARY"] == "kept"
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CONTINUAL_ACP_GATEWAY_URL", "CONTINUAL_ACP_CONFIG"):
        assert name not in env, name
    assert "JPY_PARENT_PID" not in env
    assert "test-key" not in json.dumps(env)
    assert report["inherited"] is False
    assert report["fds"] == [0, 1, 2, 3]  # 3: the listing's own directory descriptor


@as_root_with_capabilities
def test_a_program_run_through_the_seam_holds_no_capability_and_cannot_regain_one(tmp_path: Path) -> None:
    with workspace_launch.policy(tmp_path, confine=False) as launch:
        done = workspace_launch.run([sys.executable, "-c", _REPORT], launch, timeout=60)
    status = _report(done.stdout)["status"]
    assert isinstance(status, dict)
    assert {key: int(status[key], 16) for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {
        "CapInh": 0,
        "CapPrm": 0,
        "CapEff": 0,
        "CapBnd": 0,
        "CapAmb": 0,
    }
    assert status["NoNewPrivs"] == "1"


async def test_the_async_start_gives_the_same_environment_descriptors_and_capabilities(
    tmp_path: Path, leaky_fd: int
) -> None:
    with workspace_launch.policy(tmp_path, _server_like_env(), confine=False) as launch:
        async with workspace_launch.start([sys.executable, "-c", _REPORT, str(leaky_fd)], launch) as proc:
            out, err = await proc.communicate()
    assert proc.returncode == 0, err
    report = _report(out)
    assert "test-key" not in json.dumps(report["env"])
    assert report["inherited"] is False
    status = report["status"]
    assert isinstance(status, dict)
    if group_watch.holds_capabilities():
        assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0
        assert status["NoNewPrivs"] == "1"


def test_the_seam_starts_the_program_in_a_process_group_of_its_own(tmp_path: Path) -> None:
    code = "import os; print(os.getpgrp(), os.getsid(0))"
    with workspace_launch.policy(tmp_path, confine=False) as launch:
        done = workspace_launch.run([sys.executable, "-c", code], launch, timeout=60)
    pgrp, sid = (int(x) for x in done.stdout.split())
    assert pgrp != os.getpgrp()
    assert sid != os.getsid(0)


async def test_a_program_past_its_timeout_is_killed_with_its_group(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    code = f"import os, subprocess, time; p = subprocess.Popen(['sleep', '60']); open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    with workspace_launch.policy(tmp_path, confine=False) as launch:
        done = await asyncio.to_thread(workspace_launch.run, [sys.executable, "-c", code], launch, timeout=3)
    assert done.returncode is None
    child = int(marker.read_text())
    await wait_until(lambda: not _alive(child), 10)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------ confinement on sandbox tiers


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    repo = tmp_path / "ws"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\n")
    (repo / ".continual-acp").mkdir()
    (repo / ".continual-acp" / "gates.toml").write_text("")
    (repo / "src").mkdir()
    return repo


_WRITES = """
import json, os
out = {}
for rel in (".git/config", ".continual-acp/gates.toml", "src/ok.txt"):
    try:
        with open(rel, "a") as f:
            f.write("x")
        out[rel] = "wrote"
    except OSError as exc:
        out[rel] = type(exc).__name__
status = {l.split(":")[0]: l.split(":")[1].strip() for l in open("/proc/self/status") if ":" in l}
out["CapEff"] = status["CapEff"]
print(json.dumps(out))
"""


def _confined_writes(tier: str, workspace: Path) -> dict[str, str]:
    workspace_launch.use_confinement(SandboxLauncher(tier=tier))
    try:
        with workspace_launch.policy(workspace) as launch:
            assert launch.confinement is not None
            done = workspace_launch.run([sys.executable, "-c", _WRITES], launch, timeout=60)
    finally:
        workspace_launch.use_confinement(None)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.decode().splitlines()[-1]))


@requires(_BWRAP.ok, f"bubblewrap tier unavailable: {_BWRAP.reason}")
def test_on_the_bubblewrap_tier_a_command_cannot_write_git_or_the_control_plane(workspace: Path) -> None:
    found = _confined_writes("bubblewrap", workspace)
    assert found[".git/config"] == "OSError"
    assert found[".continual-acp/gates.toml"] == "OSError"
    assert found["src/ok.txt"] == "wrote"
    assert int(found["CapEff"], 16) == 0


@requires(_LANDLOCK.ok, f"landlock tier unavailable: {_LANDLOCK.reason}")
def test_on_the_landlock_tier_a_command_cannot_write_git_or_the_control_plane(workspace: Path) -> None:
    found = _confined_writes("landlock", workspace)
    assert found[".git/config"] == "PermissionError"
    assert found[".continual-acp/gates.toml"] == "PermissionError"
    assert found["src/ok.txt"] == "wrote"
    assert int(found["CapEff"], 16) == 0


def test_a_required_tier_that_cannot_work_refuses_to_start_the_command(workspace: Path) -> None:
    class Broken(SandboxLauncher):
        def probe(self) -> object:  # type: ignore[override]
            from kernel_bridge.sandbox import Probe

            return Probe("bubblewrap", False, "not here")

    workspace_launch.use_confinement(Broken(tier="bubblewrap"))
    try:
        with pytest.raises(Exception, match="sandbox_tier = 'bubblewrap' is configured"):
            with workspace_launch.policy(workspace):
                pass
    finally:
        workspace_launch.use_confinement(None)


# ------------------------------------------------------------------ safe git


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture
def hostile_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose config names a program for fsmonitor, a filter, a textconv driver and an
    alias; each appends its name to `ran` when run. Returns (repo, ran)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    ran = tmp_path / "ran.txt"
    spy = tmp_path / "spy.sh"
    spy.write_text(f'#!/bin/sh\necho "$1" >> {ran}\ncat\n')
    spy.chmod(0o755)
    (repo / "a.txt").write_text("one\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-qm", "init")
    with (repo / ".git" / "config").open("a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {spy} fsmonitor\n"
            f'[filter "spy.x"]\n\tclean = {spy} clean\n\tsmudge = {spy} smudge\n\trequired = true\n'
            f'[diff "spy"]\n\ttextconv = {spy} textconv\n\tcommand = {spy} command\n'
            f"[core]\n\tpager = {spy} pager\n"
        )
    (repo / ".gitattributes").write_text("a.txt filter=spy.x diff=spy\n")
    (repo / "a.txt").write_text("two\n")
    return repo, ran


def test_plain_git_runs_the_programs_the_hostile_repository_names(hostile_repo: tuple[Path, Path]) -> None:
    """The control: the repository really is hostile to a git without the safe settings."""
    repo, ran = hostile_repo
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "stash", "create"],
        capture_output=True,
    )
    assert {"fsmonitor", "clean"} <= set(ran.read_text().split())


@pytest.mark.parametrize(
    "args",
    [
        ("status", "--porcelain"),
        ("diff", "HEAD", "--binary"),
        ("stash", "create", "checkpoint"),
        ("ls-files", "-co", "--exclude-standard", "-z"),
    ],
)
def test_safe_git_runs_no_program_the_repository_names(
    hostile_repo: tuple[Path, Path], args: tuple[str, ...]
) -> None:
    repo, ran = hostile_repo
    done = run_git(repo, *args, config={"user.name": "t", "user.email": "t@t"})
    assert done.returncode == 0, done.stderr
    assert not ran.exists(), ran.read_text()


def test_safe_git_still_sees_the_change(hostile_repo: tuple[Path, Path]) -> None:
    repo, _ran = hostile_repo
    assert b"M a.txt" in run_git(repo, "status", "--porcelain").stdout
    assert b"+two" in run_git(repo, "diff", "HEAD").stdout


@as_root_with_capabilities
def test_a_program_git_still_runs_gets_no_key_and_no_capability(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An alias is a program git runs by design: it stands for whatever git might still run."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    report = tmp_path / "report.json"
    script = tmp_path / "report.py"
    script.write_text(_REPORT.replace("print(json.dumps(", f"open({str(report)!r}, 'w').write(json.dumps("))
    with (repo / ".git" / "config").open("a") as config:
        config.write(f"[alias]\n\tspy = !{sys.executable} {script}\n")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    done = run_git(repo, "spy")
    assert done.returncode == 0, done.stderr
    found = json.loads(report.read_text())
    assert "test-key" not in json.dumps(found["env"])
    assert int(found["status"]["CapEff"], 16) == 0
    assert int(found["status"]["CapBnd"], 16) == 0
    assert found["status"]["NoNewPrivs"] == "1"


@as_root_with_capabilities
async def test_a_kernels_interpreter_starts_without_capabilities(tmp_path: Path) -> None:
    """A kernel's interpreter may be the workspace's own venv, whose start-up (`.pth` files,
    `sitecustomize`) runs before the kernel's launch code: it must already hold nothing. The
    stand-in interpreter records its capability lines, then runs the real one."""
    from kernel_bridge import KernelPool

    report = tmp_path / "caps.txt"
    python = tmp_path / "python"
    python.write_text(
        f'#!/bin/sh\ngrep -E "^(CapEff|CapBnd|NoNewPrivs)" /proc/self/status > {report}\nexec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    pool = KernelPool(0, python=str(python))
    try:
        await pool.check_backend()  # the ipykernel probe runs the interpreter too
        probed = report.read_text()
        report.unlink()
        session = await pool.acquire(cwd=tmp_path)
        await session.shutdown(timeout=5)
    finally:
        await pool.aclose()
    for found in (probed, report.read_text()):
        lines = dict(line.split(":") for line in found.split("\n") if line)
        assert int(lines["CapEff"], 16) == 0, found
        assert int(lines["CapBnd"], 16) == 0, found
        assert lines["NoNewPrivs"].strip() == "1", found
