"""The warm pool, cold-start fallback, interpreter discovery and the kernel's environment."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
from pathlib import Path

import pytest
from kernel_bridge_support import process_gone, wait_until

from kernel_bridge import (
    InterpreterNotFound,
    KernelBridgeError,
    KernelPool,
    KernelStartError,
    resolve_interpreter,
    scrub_environment,
)
from kernel_bridge.launcher import LaunchSpec, RunningKernel, start_local_kernel

pytestmark = pytest.mark.anyio


async def test_pool_hands_out_a_ready_kernel_with_the_session_cwd(tmp_path: Path) -> None:
    pool = KernelPool(1)
    await pool.start()
    try:
        await wait_until(lambda: pool.ready_count == 1, timeout=60)
        work = tmp_path / "project"
        (work / "pkg").mkdir(parents=True)
        (work / "pkg" / "__init__.py").write_text("NAME = 'from project'\n")
        session = await pool.acquire(cwd=work, env={"SESSION_FLAG": "on"})
        assert pool.cold_starts == 0
        code = "import os\nimport pkg\nprint(os.getcwd(), os.environ['SESSION_FLAG'], pkg.NAME)"
        result = await session.execute(code).result()
        assert result.output == f"{work} on from project\n"
        await wait_until(lambda: pool.ready_count == 1, timeout=60)  # refilled in the background
    finally:
        await pool.aclose()


async def test_pool_of_size_zero_cold_starts(tmp_path: Path) -> None:
    pool = KernelPool(0)
    await pool.start()
    try:
        session = await pool.acquire(cwd=tmp_path)
        assert pool.cold_starts == 1 and pool.ready_count == 0
        assert (await session.execute("print(6 * 7)").result()).output == "42\n"
    finally:
        await pool.aclose()


async def test_dead_pooled_kernel_is_replaced_by_a_cold_start(tmp_path: Path) -> None:
    pool = KernelPool(1)
    await pool.start()
    try:
        await wait_until(lambda: pool.ready_count == 1, timeout=60)
        warm_pid = pool._ready[0].pid
        os.kill(warm_pid, signal.SIGKILL)
        await wait_until(lambda: pool.ready_count == 0)
        session = await pool.acquire(cwd=tmp_path)
        assert session.kernel_pid != warm_pid and pool.cold_starts == 1
        assert (await session.execute("print('ok')").result()).output == "ok\n"
    finally:
        await pool.aclose()


async def test_api_keys_are_scrubbed_from_the_kernel_env_unless_kept(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-1",
        "GITHUB_TOKEN": "t",
        "AWS_SECRET": "s",
        "MY_API_KEY": "kept",
        "PLAIN": "visible",
    }
    pool = KernelPool(0, base_env=env, keep_env={"MY_API_KEY"})
    try:
        session = await pool.acquire(cwd=tmp_path, env={"SESSION_TOKEN": "x"})
        code = "import os\nprint(sorted(k for k in ('OPENAI_API_KEY','GITHUB_TOKEN','AWS_SECRET','MY_API_KEY','PLAIN','SESSION_TOKEN') if k in os.environ))"
        result = await session.execute(code).result()
        assert result.output == "['MY_API_KEY', 'PLAIN']\n"
        bridge_vars = await session.execute(
            "print(sorted(k for k in os.environ if k.startswith('CONTINUAL_ACP_BRIDGE')))"
        ).result()
        assert bridge_vars.output == "['CONTINUAL_ACP_BRIDGE', 'CONTINUAL_ACP_BRIDGE_TOKEN']\n"
    finally:
        await pool.aclose()


async def test_runtime_files_are_private(tmp_path: Path) -> None:
    pool = KernelPool(0)
    try:
        await pool.acquire(cwd=tmp_path)
        runtime = pool.runtime_dir
        assert runtime.stat().st_mode & 0o777 == 0o700  # jupyter_client adds the sticky bit
        connection_files = list(runtime.glob("kernel-*.json"))
        assert connection_files
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in connection_files)
    finally:
        await pool.aclose()
    assert not runtime.exists()


async def test_setup_code_runs_after_setup_and_failures_are_reported(tmp_path: Path) -> None:
    pool = KernelPool(0)
    try:
        good = await pool.acquire(cwd=tmp_path, setup_code="import os\nskill_cwd = os.getcwd()")
        assert (await good.execute("print(skill_cwd)").result()).output == f"{tmp_path}\n"
        bad = await pool.acquire(cwd=tmp_path, setup_code="raise RuntimeError('skill failed to load')")
        assert bad.setup_error is not None and "skill failed to load" in bad.setup_error
        assert (await bad.execute("print('usable')").result()).output == "usable\n"
    finally:
        await pool.aclose()


async def test_pool_close_leaves_no_kernel_running(tmp_path: Path) -> None:
    pool = KernelPool(1)
    await pool.start()
    session = await pool.acquire(cwd=tmp_path)
    await wait_until(lambda: pool.ready_count == 1, timeout=60)
    pids = [session.kernel_pid, pool._ready[0].pid]
    await pool.aclose()
    for pid in pids:
        assert pid is not None
        await wait_until(lambda pid=pid: process_gone(pid))


def test_missing_interpreter_path_fails_with_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "python3"
    with pytest.raises(InterpreterNotFound, match=str(missing)):
        KernelPool(0, python=missing)


def test_interpreter_discovery_understands_windows_venv_layout(tmp_path: Path) -> None:
    exe = tmp_path / "venv" / "Scripts" / "python.exe"
    exe.parent.mkdir(parents=True)
    exe.write_text("")
    exe.chmod(0o755)
    assert resolve_interpreter(tmp_path / "venv") == exe
    posix = tmp_path / "env2" / "bin" / "python"
    posix.parent.mkdir(parents=True)
    posix.write_text("")
    posix.chmod(0o755)
    assert resolve_interpreter(tmp_path / "env2") == posix
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    with pytest.raises(InterpreterNotFound, match="empty-dir"):
        resolve_interpreter(empty)


def test_scrub_keeps_ordinary_variables_and_drops_secrets() -> None:
    env = {"PATH": "/bin", "OPENAI_API_KEY": "k", "X_TOKEN": "t", "db_secret": "s", "KEEP_TOKEN": "k2"}
    assert scrub_environment(env, keep={"KEEP_TOKEN"}) == {"PATH": "/bin", "KEEP_TOKEN": "k2"}


def test_scrub_drops_common_credentials_beyond_the_four_named_patterns() -> None:
    env = {
        "AWS_SECRET_ACCESS_KEY": "a",
        "AWS_ACCESS_KEY": "b",
        "DB_PASSWORD": "c",
        "SSH_PRIVATE_KEY": "d",
        "HOME": "/root",
        "KEYBOARD_LAYOUT": "us",
    }
    assert scrub_environment(env) == {"HOME": "/root", "KEYBOARD_LAYOUT": "us"}


async def test_backend_check_finds_an_interpreter_without_ipykernel_without_starting_a_kernel(
    tmp_path: Path,
) -> None:
    bare = tmp_path / "bare-python"  # this Python without site-packages: a real one lacking ipykernel
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    pool = KernelPool(0, python=bare)
    with pytest.raises(KernelStartError, match=f"{bare} has no ipykernel"):
        await pool.check_backend()
    assert pool.cold_starts == 0


async def test_backend_check_passes_for_this_servers_interpreter() -> None:
    assert "backend local" in await KernelPool(0).check_backend()


async def test_backend_check_finds_an_interpreter_removed_after_the_pool_was_built(tmp_path: Path) -> None:
    gone = tmp_path / "python"
    gone.symlink_to(sys.executable)
    pool = KernelPool(0, python=gone)
    gone.unlink()
    with pytest.raises(InterpreterNotFound, match=str(gone)):
        await pool.check_backend()


async def test_interpreter_without_ipykernel_fails_with_log_tail(tmp_path: Path) -> None:
    fake = tmp_path / "fakepython"
    fake.write_text("#!/bin/sh\necho 'No module named ipykernel_launcher' >&2\nexit 1\n")
    fake.chmod(0o755)
    pool = KernelPool(0, python=fake, startup_timeout=30)
    try:
        with pytest.raises(
            KernelStartError, match=f"(?s){fake}.*ipykernel.*No module named ipykernel_launcher"
        ):
            await pool.acquire(cwd=tmp_path)
    finally:
        await pool.aclose()


async def test_pool_starts_kernels_through_the_given_launcher(tmp_path: Path) -> None:
    seen: list[LaunchSpec] = []

    async def recording_launcher(spec: LaunchSpec) -> RunningKernel:
        seen.append(spec)
        return await start_local_kernel(spec)

    pool = KernelPool(0, launcher=recording_launcher, base_env={"PATH": os.environ.get("PATH", "")})
    try:
        session = await pool.acquire(cwd=tmp_path, env={"FROM_SESSION": "1"})
        assert (await session.execute("print('via seam')").result()).output == "via seam\n"
        assert len(seen) == 1
        assert seen[0].cwd == tmp_path.resolve() and seen[0].env["FROM_SESSION"] == "1"
    finally:
        await pool.aclose()


async def test_setup_code_that_hangs_is_interrupted_and_reported(tmp_path: Path) -> None:
    pool = KernelPool(0, interrupt_grace=1.0)
    try:
        session = await pool.acquire(
            cwd=tmp_path, setup_code="import time\ntime.sleep(600)", setup_timeout=1.0
        )
        assert session.setup_error is not None and "KeyboardInterrupt" in session.setup_error
        assert (await session.execute("print('usable')").result()).output == "usable\n"
    finally:
        await pool.aclose()


async def test_pool_close_while_a_kernel_is_warming_leaves_no_kernel(tmp_path: Path) -> None:
    launched: list[RunningKernel] = []

    async def busy_launcher(spec: LaunchSpec) -> RunningKernel:
        kernel = await start_local_kernel(spec)
        # Keep the kernel's shell busy so the pool is still preloading it when it is closed.
        kernel.client.execute("import time\ntime.sleep(600)")
        launched.append(kernel)
        return kernel

    pool = KernelPool(1, launcher=busy_launcher)
    await pool.start()
    try:
        await wait_until(lambda: bool(launched), timeout=60)
        assert pool.ready_count == 0
    finally:
        await pool.aclose()
    await wait_until(lambda: process_gone(launched[0].pid))


async def test_session_sys_path_entries_come_first_in_the_given_order(tmp_path: Path) -> None:
    first, second = tmp_path / "skills_a", tmp_path / "skills_b"
    for directory, name in ((first, "a"), (second, "b")):
        directory.mkdir()
        (directory / "which_skills.py").write_text(f"NAME = {name!r}\n")
    pool = KernelPool(0)
    try:
        session = await pool.acquire(cwd=tmp_path, sys_path=[first, second])
        expected = [str(first), str(second)]
        code = f"import sys, which_skills\nprint(sys.path[:2] == {expected!r}, which_skills.NAME)"
        assert (await session.execute(code).result()).output == "True a\n"
    finally:
        await pool.aclose()


async def test_acquire_waiting_for_a_warming_kernel_fails_cleanly_when_the_pool_closes(
    tmp_path: Path,
) -> None:
    launched: list[RunningKernel] = []

    async def busy_launcher(spec: LaunchSpec) -> RunningKernel:
        kernel = await start_local_kernel(spec)
        kernel.client.execute("import time\ntime.sleep(600)")  # preloading it will not finish
        launched.append(kernel)
        return kernel

    pool = KernelPool(1, launcher=busy_launcher)
    await pool.start()
    await wait_until(lambda: bool(launched), timeout=60)
    waiting = asyncio.ensure_future(pool.acquire(cwd=tmp_path))
    await wait_until(lambda: pool.waiting_acquires == 1)  # acquire now waits for the warming kernel
    await pool.aclose()
    with pytest.raises(KernelBridgeError, match="pool was closed"):
        await asyncio.wait_for(waiting, 30)
    assert len(launched) == 1, "no kernel was started for the closed pool"
    await wait_until(lambda: process_gone(launched[0].pid))
