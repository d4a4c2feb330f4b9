"""The sandboxed local kernel: writes only in the workspace, no network unless allowed; tiers probed."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kernel_bridge_support import wait_until
from system_deps import missing, requires

from kernel_bridge import KernelPool, KernelSession, KernelStartError, sandbox
from kernel_bridge.launcher import LaunchSpec
from kernel_bridge.sandbox import (
    SandboxLauncher,
    bubblewrap_argv,
    landlock_writable,
    probe_bubblewrap,
    probe_landlock,
)

pytestmark = pytest.mark.anyio

_BWRAP = probe_bubblewrap()
needs_bwrap = requires(_BWRAP.ok, f"bubblewrap tier unavailable: {_BWRAP.reason}")
_LANDLOCK = probe_landlock()
needs_landlock = requires(_LANDLOCK.ok, f"landlock tier unavailable: {_LANDLOCK.reason}")


@dataclass
class Layout:
    workspace: Path
    home: Path  # the server's data dir (harness, sessions)
    outside: Path  # a host directory that is writable outside the sandbox


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    base = tmp_path_factory.mktemp("sandbox")
    workspace = base / "workspace"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    home = base / "home"
    (home / "harness").mkdir(parents=True)
    (home / "harness" / "state.json").write_text("{}")
    (home / "sessions" / "s1" / "harness").mkdir(parents=True)
    (workspace / ".continual-acp").mkdir()
    (workspace / ".continual-acp" / "gates.toml").write_text("[[gate]]\ncommand = 'pytest'\n")
    # Not under /tmp (the sandbox has a private /tmp): a host directory this user can write.
    outside = Path(tempfile.mkdtemp(prefix="cacp-outside-", dir="/var/tmp"))
    yield Layout(workspace, home, outside)
    shutil.rmtree(outside, ignore_errors=True)


@pytest.fixture(scope="module")
async def sandboxed(layout: Layout) -> AsyncIterator[KernelSession]:
    if not _BWRAP.ok:
        missing(f"bubblewrap tier unavailable: {_BWRAP.reason}")
    pool = KernelPool(0, launcher=SandboxLauncher(protected=(layout.home,)), interrupt_grace=3.0)
    s = await pool.acquire(cwd=layout.workspace, snapshot_path=layout.home / "sessions" / "s1")
    yield s
    await pool.aclose()


async def _run(session: KernelSession, code: str) -> tuple[str, str]:
    result = await session.execute(code).result()
    return result.status, result.error.evalue if result.error else result.output


@needs_bwrap
async def test_sandbox_cell_can_write_in_the_workspace(sandboxed: KernelSession, layout: Layout) -> None:
    assert await _run(sandboxed, "open('made.txt', 'w').write('inside'); print('ok')") == ("ok", "ok\n")
    assert (layout.workspace / "made.txt").read_text() == "inside"


@needs_bwrap
async def test_sandbox_cell_cannot_write_outside_the_workspace(
    sandboxed: KernelSession, layout: Layout
) -> None:
    status, message = await _run(sandboxed, f"open({str(layout.outside / 'x.txt')!r}, 'w')")
    assert status == "error" and "Read-only file system" in message
    assert not (layout.outside / "x.txt").exists()


@needs_bwrap
async def test_sandbox_cell_cannot_write_the_git_config(sandboxed: KernelSession, layout: Layout) -> None:
    status, message = await _run(sandboxed, "open('.git/config', 'a').write('[evil]\\n')")
    assert status == "error" and "Read-only file system" in message
    assert (layout.workspace / ".git" / "config").read_text() == "[core]\n"


@needs_bwrap
async def test_sandbox_cell_cannot_write_the_harness_state(sandboxed: KernelSession, layout: Layout) -> None:
    target = layout.home / "harness" / "state.json"
    status, message = await _run(sandboxed, f"open({str(target)!r}, 'w').write('tampered')")
    assert status == "error" and "Read-only file system" in message
    assert target.read_text() == "{}"


@needs_bwrap
async def test_sandbox_cell_cannot_write_the_sessions_local_harness(
    sandboxed: KernelSession, layout: Layout
) -> None:
    target = layout.home / "sessions" / "s1" / "harness" / "note.md"
    status, message = await _run(sandboxed, f"open({str(target)!r}, 'w')")
    assert status == "error" and "Read-only file system" in message


async def _listener() -> tuple[asyncio.Server, int]:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


@needs_bwrap
async def test_sandbox_cell_cannot_write_the_control_plane(sandboxed: KernelSession, layout: Layout) -> None:
    gates = layout.workspace / ".continual-acp" / "gates.toml"
    status, error = await _run(sandboxed, f"open({str(gates)!r}, 'w').write('command = true')")
    assert status == "error" and "Read-only file system" in error
    entry = layout.workspace / ".continual-acp" / "harness" / "entries" / "prompt" / "x.md"
    status, error = await _run(sandboxed, f"import os; os.makedirs({str(entry.parent)!r})")
    assert status == "error" and "Read-only file system" in error
    assert "pytest" in gates.read_text()


def test_bubblewrap_binds_an_interpreter_under_tmp_back_after_the_private_tmp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    venv = Path("/tmp/clone/.venv")
    monkeypatch.setattr(sandbox, "interpreter_paths", lambda: [Path("/usr"), Path("/tmp"), venv])
    spec = LaunchSpec(python=Path(sys.executable), cwd=tmp_path, env={}, runtime_dir=tmp_path / "rt")
    argv = bubblewrap_argv(spec, network=False, protected=(), own_dir=tmp_path / "own", runtime=tmp_path)
    tmpfs = argv.index("/tmp", argv.index("--tmpfs"))
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"]
    assert str(venv) in binds and argv.index(str(venv)) > tmpfs
    assert "/usr" not in binds and "/tmp" not in binds  # / is bound already; /tmp stays private


def test_bubblewrap_mounts_a_missing_control_plane_as_an_empty_read_only_directory(tmp_path: Path) -> None:
    spec = LaunchSpec(python=Path(sys.executable), cwd=tmp_path, env={}, runtime_dir=tmp_path / "rt")
    argv = bubblewrap_argv(spec, network=False, protected=(), own_dir=tmp_path / "own", runtime=tmp_path)
    control = str(tmp_path.resolve() / ".continual-acp")
    assert argv[argv.index(control) - 1] == "--tmpfs" and argv[argv.index(control) + 1] == "--remount-ro"


def test_interpreter_paths_hold_the_prefix_and_the_executables_directory() -> None:
    found = sandbox.interpreter_paths()
    assert Path(sys.prefix).resolve() in found
    assert Path(os.path.realpath(sys.executable)).parent in found


@needs_bwrap
async def test_sandbox_cell_cannot_connect_to_loopback_without_network(sandboxed: KernelSession) -> None:
    server, port = await _listener()
    try:
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3).close()\nprint('connected')"
        status, message = await _run(sandboxed, code)
    finally:
        server.close()
    assert status == "error" and "Connection refused" in message


@needs_bwrap
async def test_sandbox_network_setting_allows_loopback(layout: Layout, tmp_path: Path) -> None:
    server, port = await _listener()
    pool = KernelPool(0, launcher=SandboxLauncher(network=True, protected=(layout.home,)))
    try:
        s = await pool.acquire(cwd=tmp_path)
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3).close()\nprint('connected')"
        assert await _run(s, code) == ("ok", "connected\n")
    finally:
        await pool.aclose()
        server.close()


@needs_bwrap
async def test_sandbox_interrupt_stops_a_sleeping_cell(sandboxed: KernelSession) -> None:
    run = sandboxed.execute("import time\ntime.sleep(60)")
    await asyncio.wait_for(run.started.wait(), 30)
    await asyncio.sleep(0.3)  # let the kernel enter the sleep (no event marks it)
    began = time.monotonic()
    await sandboxed.interrupt()
    result = await run.result()
    assert result.status == "interrupted"
    assert (
        result.error is not None and result.error.ename == "KeyboardInterrupt"
    )  # not a kill after the grace
    assert time.monotonic() - began < 3.0


@needs_bwrap
async def test_sandbox_snapshot_and_restart_restore(sandboxed: KernelSession, layout: Layout) -> None:
    await sandboxed.execute("kept = [1, 2]").result()
    report = await sandboxed.restart()
    assert "kept" in report
    assert await _run(sandboxed, "print(kept)") == ("ok", "[1, 2]\n")
    # Staged in the kernel's own directory, copied into the session dir by the host.
    assert (layout.home / "sessions" / "s1" / "kernel-state.dill").is_file()


@needs_bwrap
def test_sandbox_guarantees_report_the_bubblewrap_tier() -> None:
    guarantees = SandboxLauncher().guarantees
    assert (guarantees.confined, guarantees.tier, guarantees.network) == (True, "bubblewrap", False)
    assert guarantees.approval_required is False


def test_sandbox_without_a_tier_requires_approval_for_every_cell() -> None:
    guarantees = SandboxLauncher(tier="none").guarantees
    assert guarantees.confined is False and guarantees.approval_required is True
    assert "NOT sandboxed" in guarantees.describe()


def test_sandbox_probe_without_bwrap_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    probe = probe_bubblewrap()
    assert probe.ok is False and "apt-get install bubblewrap" in probe.reason


async def test_sandbox_check_fails_when_the_required_bubblewrap_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    pool = KernelPool(0, launcher=SandboxLauncher(tier="bubblewrap"))
    with pytest.raises(KernelStartError, match="sandbox_tier = 'bubblewrap' is configured but bubblewrap"):
        await pool.check_backend()


async def test_sandbox_required_bubblewrap_that_is_missing_never_starts_an_unconfined_kernel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    pool = KernelPool(0, launcher=SandboxLauncher(tier="bubblewrap"), runtime_dir=tmp_path / "rt")
    try:
        with pytest.raises(KernelStartError, match="sandbox_tier = 'bubblewrap'"):
            await pool.acquire(cwd=tmp_path)
    finally:
        await pool.aclose()


async def test_sandbox_check_passes_with_no_tier_in_auto_and_asks_approval_naming_both_reasons(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap, for real
    # Landlock cannot be switched off for one test: its probe is replaced by the answer an old kernel gives.
    monkeypatch.setattr(
        sandbox.landlock, "abi_version", lambda: (0, "Landlock is not enabled in this kernel")
    )
    pool = KernelPool(0, launcher=SandboxLauncher())
    described = await pool.check_backend()
    assert "NOT sandboxed: every cell needs approval" in described
    assert "bubblewrap is not installed" in described and "Landlock is not enabled" in described
    assert pool.guarantees.approval_required is True


def test_sandbox_pool_does_not_warm_before_a_workspace_is_known() -> None:
    pool = KernelPool(2, launcher=SandboxLauncher(tier="none"))
    pool._refill()
    assert pool._warming == 0


@needs_bwrap
async def test_sandbox_pool_warms_a_kernel_for_the_last_workspace(layout: Layout, tmp_path: Path) -> None:
    pool = KernelPool(1, launcher=SandboxLauncher(protected=(layout.home,)), refill_delay=0)
    try:
        await pool.start()
        first = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "s-a")
        await wait_until(lambda: pool.ready_count == 1, timeout=60)
        second = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "s-b")
        assert pool.cold_starts == 1  # the second session took the warm kernel
        result = await second.execute("open('warm.txt', 'w').write('w'); print('ok')").result()
        assert result.output == "ok\n"
        status, message = await _run(second, f"open({str(layout.outside / 'w.txt')!r}, 'w')")
        assert status == "error" and "Read-only file system" in message
        await first.shutdown(final_snapshot=False)
    finally:
        await pool.aclose()


@needs_bwrap
async def test_sandbox_kernel_cannot_write_another_kernels_directory(layout: Layout, tmp_path: Path) -> None:
    pool = KernelPool(0, launcher=SandboxLauncher(protected=(layout.home,)))
    try:
        a = await pool.acquire(cwd=tmp_path)
        b = await pool.acquire(cwd=tmp_path)
        other = b._kernel.log_path.parent  # type: ignore[union-attr]
        status, message = await _run(a, f"open({str(other / 'planted.dill')!r}, 'w')")
        assert status == "error" and "Read-only file system" in message
    finally:
        await pool.aclose()


@needs_bwrap
async def test_sandbox_restore_in_a_new_session_loads_the_copied_snapshot(
    layout: Layout, tmp_path: Path
) -> None:
    pool = KernelPool(0, launcher=SandboxLauncher(protected=(layout.home,)))
    try:
        s = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "sess")
        await s.execute("carried = 'across sessions'").result()
        await s.shutdown()  # final snapshot, copied to the session dir
        again = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "sess")
        report = await again.restore()
        assert report.restored == ["carried"]
    finally:
        await pool.aclose()


# ---------------------------------------------------------------- the Landlock + seccomp tier


@pytest.fixture(scope="module")
def ll_layout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    base = tmp_path_factory.mktemp("landlock")
    workspace = base / "workspace"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "src").mkdir()
    (workspace / "notes.txt").write_text("notes\n")
    (workspace / ".continual-acp" / "harness").mkdir(parents=True)
    (workspace / ".continual-acp" / "gates.toml").write_text("[[gate]]\ncommand = 'pytest'\n")
    home = base / "home"
    (home / "harness").mkdir(parents=True)
    (home / "harness" / "state.json").write_text("{}")
    outside = Path(tempfile.mkdtemp(prefix="cacp-outside-", dir="/var/tmp"))
    yield Layout(workspace, home, outside)
    shutil.rmtree(outside, ignore_errors=True)


@pytest.fixture(scope="module")
async def landlocked(ll_layout: Layout) -> AsyncIterator[KernelSession]:
    if not _LANDLOCK.ok:
        missing(f"landlock tier unavailable: {_LANDLOCK.reason}")
    launcher = SandboxLauncher(protected=(ll_layout.home,), tier="landlock")
    pool = KernelPool(0, launcher=launcher, interrupt_grace=3.0)
    s = await pool.acquire(cwd=ll_layout.workspace, snapshot_path=ll_layout.home / "sessions" / "s1")
    yield s
    await pool.aclose()


def test_landlock_rules_split_the_workspace_around_git_and_skip_symlinks(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "README.md").write_text("")
    (tmp_path / "out").symlink_to("/etc")
    assert landlock_writable(tmp_path, [tmp_path / ".git"]) == [tmp_path / "README.md", tmp_path / "src"]


def test_landlock_rules_grant_a_workspace_without_protected_paths_whole(tmp_path: Path) -> None:
    assert landlock_writable(tmp_path / "", [tmp_path.parent / "elsewhere"]) == [tmp_path.resolve()]


@needs_landlock
async def test_landlock_cell_can_write_in_a_workspace_folder_and_existing_file(
    landlocked: KernelSession, ll_layout: Layout
) -> None:
    code = "open('src/made.py', 'w').write('x = 1'); open('notes.txt', 'a').write('more'); print('ok')"
    assert await _run(landlocked, code) == ("ok", "ok\n")
    assert (ll_layout.workspace / "src" / "made.py").read_text() == "x = 1"


@needs_landlock
async def test_landlock_cell_cannot_create_an_entry_in_the_workspace_root(
    landlocked: KernelSession, ll_layout: Layout
) -> None:
    status, message = await _run(landlocked, "open('results.csv', 'w')")
    assert status == "error" and "Permission denied" in message
    assert not (ll_layout.workspace / "results.csv").exists()


@needs_landlock
async def test_landlock_cell_cannot_write_outside_the_workspace(
    landlocked: KernelSession, ll_layout: Layout
) -> None:
    status, message = await _run(landlocked, f"open({str(ll_layout.outside / 'x.txt')!r}, 'w')")
    assert status == "error" and "Permission denied" in message
    assert not (ll_layout.outside / "x.txt").exists()


@needs_landlock
async def test_landlock_cell_cannot_write_or_truncate_the_git_config(
    landlocked: KernelSession, ll_layout: Layout
) -> None:
    code = (
        "import os\nfor act in (lambda: open('.git/config', 'a'), lambda: os.truncate('.git/config', 0),"
        " lambda: os.rename('.git', 'g')):\n    try:\n        act()\n        print('allowed')\n"
        "    except PermissionError:\n        print('denied')"
    )
    assert await _run(landlocked, code) == ("ok", "denied\ndenied\ndenied\n")
    assert (ll_layout.workspace / ".git" / "config").read_text() == "[core]\n"


@needs_landlock
async def test_landlock_cell_cannot_write_the_harness_state(
    landlocked: KernelSession, ll_layout: Layout
) -> None:
    target = ll_layout.home / "harness" / "state.json"
    status, message = await _run(landlocked, f"open({str(target)!r}, 'w').write('tampered')")
    assert status == "error" and "Permission denied" in message
    assert target.read_text() == "{}"


@needs_landlock
async def test_landlock_cell_cannot_write_the_control_plane(
    landlocked: KernelSession, ll_layout: Layout
) -> None:
    gates = ll_layout.workspace / ".continual-acp" / "gates.toml"
    status, error = await _run(landlocked, f"open({str(gates)!r}, 'w').write('command = true')")
    assert status == "error" and "Permission denied" in error
    entry = ll_layout.workspace / ".continual-acp" / "harness" / "x.md"
    status, error = await _run(landlocked, f"open({str(entry)!r}, 'w').write('cheat')")
    assert status == "error" and "Permission denied" in error
    assert "pytest" in gates.read_text() and not entry.exists()


@needs_landlock
async def test_landlock_cell_cannot_connect_to_loopback_without_network(landlocked: KernelSession) -> None:
    server, port = await _listener()
    try:
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3).close()\nprint('connected')"
        status, message = await _run(landlocked, code)
    finally:
        server.close()
    assert status == "error" and "Permission denied" in message


@needs_landlock
async def test_landlock_cell_cannot_open_a_udp_socket_without_network(landlocked: KernelSession) -> None:
    status, message = await _run(
        landlocked, "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
    )
    assert status == "error" and "Permission denied" in message


@needs_landlock
async def test_landlock_shell_escape_runs_without_a_pty(landlocked: KernelSession) -> None:
    assert await _run(landlocked, "!echo from-the-shell") == ("ok", "from-the-shell\n")


@needs_landlock
async def test_landlock_interrupt_stops_a_sleeping_cell(landlocked: KernelSession) -> None:
    run = landlocked.execute("import time\ntime.sleep(60)")
    await asyncio.wait_for(run.started.wait(), 30)
    await asyncio.sleep(0.3)  # let the kernel enter the sleep (no event marks it)
    await landlocked.interrupt()
    result = await run.result()
    assert result.status == "interrupted" and result.error is not None
    assert result.error.ename == "KeyboardInterrupt"


@needs_landlock
async def test_landlock_snapshot_and_restart_restore(landlocked: KernelSession, ll_layout: Layout) -> None:
    await landlocked.execute("kept = [1, 2]").result()
    report = await landlocked.restart()
    assert "kept" in report
    assert await _run(landlocked, "print(kept)") == ("ok", "[1, 2]\n")
    assert (ll_layout.home / "sessions" / "s1" / "kernel-state.dill").is_file()


@needs_landlock
def test_landlock_guarantees_name_the_tier_and_the_workspace_root_limit() -> None:
    guarantees = SandboxLauncher(tier="landlock").guarantees
    assert (guarantees.confined, guarantees.tier, guarantees.approval_required) == (True, "landlock", False)
    assert "workspace root cannot be created, removed or renamed" in guarantees.describe()
