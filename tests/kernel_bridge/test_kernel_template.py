"""Local kernels forked from the kernel template: the same kernel a launch gives, held the same way."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kernel_bridge_support import process_gone, wait_until

from kernel_bridge.backend import LocalBackend
from kernel_bridge.kernel_template import KernelTemplates, forking_supported
from kernel_bridge.launcher import LaunchSpec, RunningKernel, start_local_kernel

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not forking_supported() and not os.environ.get("CI"),
        reason="no pidfd on this host: kernels are launched",
    ),
]


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def run_cell(kernel: RunningKernel, code: str, timeout: float = 30.0) -> tuple[str, str]:
    """Run `code`; its stdout and its status ("ok" or the error's name)."""
    msg_id = kernel.client.execute(code)
    out: list[str] = []
    status = "ok"
    while True:
        message = await kernel.client.get_iopub_msg(timeout=timeout)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "stream" and content["name"] == "stdout":
            out.append(content["text"])
        elif kind == "error":
            status = content["ename"]
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out), status


@pytest.fixture
async def templates() -> AsyncIterator[KernelTemplates]:
    made = KernelTemplates()
    yield made
    made.close()


def spec_for(tmp_path: Path, **env: str) -> LaunchSpec:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "JPY_"))}
    return LaunchSpec(python=Path(sys.executable), cwd=work, env={**base, **env}, runtime_dir=tmp_path / "rt")


async def test_a_forked_kernel_has_the_launch_s_cwd_env_argv_session_and_log(
    tmp_path: Path, templates: KernelTemplates
) -> None:
    spec = spec_for(tmp_path, CONTINUAL_TEST_MARK="forked-1")
    kernel = await start_local_kernel(spec, templates=templates)
    try:
        template = parent_of(kernel.pid)
        assert template != os.getpid(), "the kernel is this process's child: it was launched, not forked"
        assert b"--template" in Path(f"/proc/{template}/cmdline").read_bytes()
        code = (
            "import json, os, sys\n"
            "print(json.dumps({'cwd': os.getcwd(), 'mark': os.environ.get('CONTINUAL_TEST_MARK'),"
            " 'parent': os.environ.get('JPY_PARENT_PID'), 'argv': sys.argv[1:], 'leads': os.getsid(0) == os.getpid(),"
            " 'stdin': os.readlink('/proc/self/fd/0'), 'path0': sys.path[0] if sys.path else ''}))\n"
            "print('to the log', file=sys.__stderr__, flush=True)\n"
        )
        out, status = await run_cell(kernel, code)
        assert status == "ok"
        seen: dict[str, Any] = json.loads(out)
        assert seen["cwd"] == str(spec.cwd)
        assert seen["mark"] == "forked-1"
        assert seen["parent"] == str(os.getpid())
        assert seen["argv"][0] == "-f" and seen["argv"][1] == kernel.km.connection_file
        assert seen["leads"] is True
        assert seen["stdin"] == "/dev/null"
        assert "kernelspecs" not in seen["path0"], "the launch file's directory is on the kernel's path"
        await wait_until(lambda: "to the log" in kernel.log_tail())
    finally:
        await kernel.shutdown()


async def test_a_second_kernel_is_forked_from_the_same_template_and_a_new_env_gets_its_own(
    tmp_path: Path, templates: KernelTemplates
) -> None:
    first = await start_local_kernel(spec_for(tmp_path), templates=templates)
    second = await start_local_kernel(spec_for(tmp_path), templates=templates)
    other = await start_local_kernel(spec_for(tmp_path, CONTINUAL_TEST_MARK="other"), templates=templates)
    try:
        assert parent_of(first.pid) == parent_of(second.pid)
        # An environment is fixed at an interpreter's start (PYTHONPATH, locale, ...): another one
        # is another template, never a kernel started under the wrong one.
        assert parent_of(other.pid) != parent_of(first.pid)
        out, _ = await run_cell(other, "import os; print(os.environ['CONTINUAL_TEST_MARK'])")
        assert out == "other\n"
    finally:
        for kernel in (first, second, other):
            await kernel.shutdown()


async def test_a_forked_kernel_is_interrupted_and_its_exit_code_reaches_the_server(
    tmp_path: Path, templates: KernelTemplates
) -> None:
    kernel = await start_local_kernel(spec_for(tmp_path), templates=templates)
    try:
        running = kernel.client.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(60)")
        while True:
            message = await kernel.client.get_iopub_msg(timeout=30)
            if message["parent_header"].get("msg_id") == running and message["msg_type"] == "stream":
                break
        await kernel.interrupt()
        while True:
            message = await kernel.client.get_iopub_msg(timeout=30)
            if message["parent_header"].get("msg_id") != running:
                continue
            if message["msg_type"] == "error":
                assert message["content"]["ename"] == "KeyboardInterrupt"
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                break
        assert (await kernel.client.get_shell_msg(timeout=30))["content"]["status"] == "error"
        kernel.client.execute("import os; os._exit(7)")
        await wait_until(lambda: kernel.exit_code() is not None)
        assert kernel.exit_code() == 7
        assert kernel.describe_exit() == "exit code 7"
    finally:
        await kernel.kill()


async def test_the_template_cannot_be_read_or_traced_from_a_kernel(
    tmp_path: Path, templates: KernelTemplates
) -> None:
    # What later kernels are forked from must not take code from a cell: it is not dumpable, so a
    # process of the same user (root without capabilities included) cannot open its memory.
    kernel = await start_local_kernel(spec_for(tmp_path), templates=templates)
    try:
        template = parent_of(kernel.pid)
        code = (
            "import os\n"
            f"for name in ('mem', 'environ'):\n"
            f"    try:\n"
            f"        open('/proc/{template}/' + name, 'rb').read(1)\n"
            f"        print(name, 'OPEN')\n"
            f"    except OSError as exc:\n"
            f"        print(name, type(exc).__name__)\n"
            "print('own', len(open('/proc/self/environ', 'rb').read()) > 0)\n"
        )
        out, status = await run_cell(kernel, code)
        assert status == "ok"
        assert out == "mem PermissionError\nenviron PermissionError\nown True\n"
    finally:
        await kernel.shutdown()


async def test_a_dead_template_ends_its_kernels_and_the_next_kernel_is_launched(
    tmp_path: Path, templates: KernelTemplates
) -> None:
    forked = await start_local_kernel(spec_for(tmp_path), templates=templates)
    template = parent_of(forked.pid)
    os.kill(template, signal.SIGKILL)
    try:
        await wait_until(lambda: process_gone(forked.pid))  # it watches the template
        await wait_until(lambda: forked.exit_code() is not None)
        launched = await start_local_kernel(spec_for(tmp_path), templates=templates)
        try:
            assert parent_of(launched.pid) == os.getpid()
            out, _ = await run_cell(launched, "print(6 * 7)")
            assert out == "42\n"
        finally:
            await launched.shutdown()
    finally:
        await forked.kill()


async def test_closing_the_local_backend_ends_its_template(tmp_path: Path) -> None:
    backend = LocalBackend()
    kernel = await backend(spec_for(tmp_path))
    template = parent_of(kernel.pid)
    assert template != os.getpid()
    await kernel.shutdown()
    await backend.aclose()
    await wait_until(lambda: process_gone(template))


async def test_a_kernel_of_another_interpreter_is_launched(
    tmp_path: Path, templates: KernelTemplates
) -> None:
    # Only this server's own interpreter is forked: a workspace's venv runs code of its own at start.
    same_venv = Path(sys.executable).with_name(f"python{sys.version_info[0]}.{sys.version_info[1]}")
    assert same_venv.exists() and str(same_venv) != sys.executable
    spec = LaunchSpec(
        python=same_venv, cwd=spec_for(tmp_path).cwd, env=spec_for(tmp_path).env, runtime_dir=tmp_path / "rt"
    )
    kernel = await start_local_kernel(spec, templates=templates)
    try:
        assert parent_of(kernel.pid) == os.getpid()
    finally:
        await kernel.shutdown()


FAKE_TEMPLATE = """
import json, os, socket, sys
channel = socket.socket(fileno=int(sys.argv[-1]))
channel.send(b"not json")
channel.send(b"[1, 2]")
socket.send_fds(channel, [json.dumps({"started": 999, "pid": 1}).encode()], [os.open(os.devnull, os.O_RDONLY)])
channel.send(json.dumps({"exited": "x", "code": None}).encode())
data, fds, _, _ = socket.recv_fds(channel, 1 << 20, 2)
request = json.loads(data)
channel.send(json.dumps({"failed": request["id"], "error": "no such directory"}).encode())
data, fds, _, _ = socket.recv_fds(channel, 1 << 20, 2)
channel.send(json.dumps({"started": json.loads(data)["id"], "pid": "one"}).encode())
channel.recv(1)
"""


def test_a_template_s_garbage_and_refusals_are_errors_not_kernels(tmp_path: Path) -> None:
    # The channel is read as untrusted input: unreadable messages, a reply to no request, an exit
    # that names no pid, a refusal and a reply without a pidfd each end as a clear refusal at most.
    from kernel_bridge.kernel_template import KernelTemplate, TemplateUnavailable

    template = KernelTemplate([sys.executable, "-c", FAKE_TEMPLATE], {}, tmp_path, tmp_path / "template.log")
    try:
        with open(tmp_path / "kernel.log", "wb") as log:
            with pytest.raises(TemplateUnavailable, match="no such directory") as refused:
                template.fork(["-f", "x"], {}, str(tmp_path), log.fileno(), timeout=30)
            assert refused.value.ended is False and template.open
            with pytest.raises(TemplateUnavailable, match="could not fork") as broken:
                template.fork(["-f", "x"], {}, str(tmp_path), log.fileno(), timeout=30)
            assert broken.value.ended is True
    finally:
        template.close()
    assert not template.open
