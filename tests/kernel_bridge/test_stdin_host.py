"""Host calls over the kernel's stdin channel (the transport that crosses a gateway), local kernels."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kernel_bridge import KernelPool, KernelSession, LaunchSpec, RunningKernel, Stream, start_local_kernel

pytestmark = pytest.mark.anyio


class _RemoteLikeLauncher:
    """A local kernel launcher that says its kernels may be elsewhere (so the pool offers stdin)."""

    remote = True

    async def __call__(self, spec: LaunchSpec) -> RunningKernel:
        return await start_local_kernel(spec)


async def _echo(args: dict[str, Any]) -> Any:
    return {"echo": args}


async def _fail(args: dict[str, Any]) -> Any:
    raise RuntimeError("store is locked")


@pytest.fixture(scope="module")
async def stdin_session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelSession]:
    pool = KernelPool(0, host_transport="stdin", interrupt_grace=3.0)
    s = await pool.acquire(cwd=tmp_path_factory.mktemp("stdin"))
    s.host_bridge.register("echo", _echo)
    s.host_bridge.register("fail", _fail)
    await s.execute("from kernel_bridge import hostclient as bridge").result()
    yield s
    await pool.aclose()


async def test_forced_stdin_transport_answers_a_blocking_call(stdin_session: KernelSession) -> None:
    result = await stdin_session.execute("print(bridge.call('echo', n=1))").result()
    assert result.output == "{'echo': {'n': 1}}\n"
    assert stdin_session.host_bridge.calls_served >= 1


async def test_forced_stdin_transport_sets_the_stdin_address(stdin_session: KernelSession) -> None:
    result = await stdin_session.execute("import os; print(os.environ['CONTINUAL_ACP_BRIDGE'])").result()
    assert result.output == "stdin:\n"


async def test_stdin_transport_awaitable_call(stdin_session: KernelSession) -> None:
    result = await stdin_session.execute("print(await bridge.acall('echo', k='v'))").result()
    assert result.output == "{'echo': {'k': 'v'}}\n"


async def test_stdin_transport_host_error_becomes_host_error(stdin_session: KernelSession) -> None:
    code = "try:\n    bridge.call('fail')\nexcept bridge.HostError as e:\n    print('HostError:', e)"
    result = await stdin_session.execute(code).result()
    assert result.output == "HostError: fail: RuntimeError: store is locked\n"


async def test_stdin_transport_many_calls_in_one_cell(stdin_session: KernelSession) -> None:
    code = "print(sum(bridge.call('echo', i=i)['echo']['i'] for i in range(200)))"
    result = await stdin_session.execute(code).result()
    assert result.output == f"{sum(range(200))}\n"


async def test_user_input_gets_an_empty_answer_and_a_notice(stdin_session: KernelSession) -> None:
    run = stdin_session.execute("answer = input('name? ')\nprint(repr(answer))")
    notices = [e.text async for e in run if isinstance(e, Stream) and e.name == "stderr"]
    result = await run.result()
    assert result.output.endswith("''\n")
    assert any("input() is not available" in text for text in notices)


async def test_interrupt_during_a_stdin_host_call_leaves_the_next_call_working(
    stdin_session: KernelSession,
) -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(args: dict[str, Any]) -> str:
        entered.set()
        await release.wait()
        return "late"

    stdin_session.host_bridge.register("slow", slow)
    run = stdin_session.execute("bridge.call('slow')")
    await asyncio.wait_for(run.started.wait(), 30)
    await asyncio.wait_for(entered.wait(), 30)
    await stdin_session.interrupt()
    result = await run.result()
    assert result.status == "interrupted", result.output
    assert result.error is not None and result.error.ename == "KeyboardInterrupt", result.error
    release.set()
    after = await stdin_session.execute("print(bridge.call('echo', after=True))").result()
    assert after.output == "{'echo': {'after': True}}\n"


async def test_unreachable_socket_falls_back_to_stdin(tmp_path_factory: pytest.TempPathFactory) -> None:
    pool = KernelPool(0, launcher=_RemoteLikeLauncher())
    try:
        s = await pool.acquire(cwd=tmp_path_factory.mktemp("fallback"))
        s.host_bridge.register("echo", _echo)
        # As seen from a kernel on another machine: the host's socket path does not exist there.
        code = (
            "import os\nfrom kernel_bridge import hostclient as bridge\n"
            "os.environ['CONTINUAL_ACP_BRIDGE'] = 'unix:/nonexistent/bridge.sock'\n"
            "bridge._local.conn = None\n"
            "print(bridge.call('echo', via='fallback'), bridge._use_stdin())"
        )
        result = await s.execute(code).result()
        assert result.output == "{'echo': {'via': 'fallback'}} True\n"
    finally:
        await pool.aclose()


async def test_reachable_socket_is_used_even_when_stdin_is_offered(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    pool = KernelPool(0, launcher=_RemoteLikeLauncher())
    try:
        s = await pool.acquire(cwd=tmp_path_factory.mktemp("socket"))
        s.host_bridge.register("echo", _echo)
        code = (
            "import os\nfrom kernel_bridge import hostclient as bridge\n"
            "print(os.environ['CONTINUAL_ACP_BRIDGE_STDIN'], bridge.call('echo', x=1), bridge._use_stdin())"
        )
        result = await s.execute(code).result()
        assert result.output == "1 {'echo': {'x': 1}} False\n"
    finally:
        await pool.aclose()


async def test_local_pool_offers_no_stdin_by_default(tmp_path_factory: pytest.TempPathFactory) -> None:
    pool = KernelPool(0)
    assert pool.host_stdin == "off"
    await pool.aclose()
