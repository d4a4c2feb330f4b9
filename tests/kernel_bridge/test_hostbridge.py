"""The host bridge: kernel code calls host handlers while a cell runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kernel_bridge import HostBridge, KernelPool, KernelSession, hostclient, kernelside

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def bridged(pool: KernelPool, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelSession]:
    s = await pool.acquire(cwd=tmp_path_factory.mktemp("bridge"))
    calls: list[dict[str, Any]] = []

    async def echo(args: dict[str, Any]) -> Any:
        calls.append(args)
        return {"echo": args}

    async def fail(args: dict[str, Any]) -> Any:
        raise RuntimeError(f"store is locked ({args.get('why')})")

    s.host_bridge.register("echo", echo)
    s.host_bridge.register("fail", fail)
    await s.execute("from kernel_bridge import hostclient as bridge").result()
    yield s
    await s.shutdown(final_snapshot=False)


async def test_blocking_and_awaitable_calls_return_host_results(bridged: KernelSession) -> None:
    code = "print(bridge.call('echo', n=1))\nprint(await bridge.acall('echo', n=2))"
    result = await bridged.execute(code).result()
    assert result.output == "{'echo': {'n': 1}}\n{'echo': {'n': 2}}\n"


async def test_a_cell_can_call_the_host_a_thousand_times(bridged: KernelSession) -> None:
    before = bridged.host_bridge.calls_served
    code = (
        "total = 0\nfor i in range(1000):\n    total += bridge.call('echo', i=i)['echo']['i']\nprint(total)"
    )
    result = await bridged.execute(code).result()
    assert result.output == f"{sum(range(1000))}\n"
    assert bridged.host_bridge.calls_served - before == 1000


async def test_concurrent_awaitable_calls_each_get_their_own_reply(bridged: KernelSession) -> None:
    code = (
        "import asyncio\n"
        "replies = await asyncio.gather(*(bridge.acall('echo', i=i) for i in range(50)))\n"
        "print([r['echo']['i'] for r in replies] == list(range(50)))"
    )
    assert (await bridged.execute(code).result()).output == "True\n"


async def test_unknown_host_op_raises_host_error_naming_it(bridged: KernelSession) -> None:
    result = await bridged.execute("bridge.call('no.such.op')").result()
    assert result.status == "error" and result.error is not None
    assert result.error.ename == "HostError"
    assert "unknown host operation 'no.such.op'" in result.error.evalue


async def test_host_handler_exception_reaches_the_kernel_with_its_message(bridged: KernelSession) -> None:
    code = "try:\n    bridge.call('fail', why='review pending')\nexcept bridge.HostError as e:\n    print('caught:', e)"
    result = await bridged.execute(code).result()
    assert result.output == "caught: fail: RuntimeError: store is locked (review pending)\n"


async def test_non_json_arguments_fail_in_the_kernel_with_a_clear_error(bridged: KernelSession) -> None:
    result = await bridged.execute("bridge.call('echo', value=object())").result()
    assert result.error is not None and "not JSON-serialisable" in result.error.evalue


async def test_call_interrupted_mid_flight_does_not_confuse_the_next_call(bridged: KernelSession) -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    async def slow(args: dict[str, Any]) -> Any:
        entered.set()
        await release.wait()
        return "stale reply"

    bridged.host_bridge.register("slow", slow)
    run = bridged.execute("bridge.call('slow')")
    await asyncio.wait_for(entered.wait(), 20)
    await bridged.interrupt()  # the kernel is blocked inside bridge.call
    result = await run.result()
    release.set()
    assert result.status == "interrupted"
    after = await bridged.execute("print(bridge.call('echo', fresh=True))").result()
    assert after.output == "{'echo': {'fresh': True}}\n"


async def test_calls_from_a_kernel_thread_keep_working_while_a_cell_is_interrupted(
    bridged: KernelSession,
) -> None:
    code = (
        "import threading, time\n"
        "worker_results, worker_errors = [], []\n"
        "def worker():\n"
        "    for i in range(300):\n"
        "        try:\n"
        "            worker_results.append(bridge.call('echo', i=i)['echo']['i'])\n"
        "        except Exception as exc:\n"
        "            worker_errors.append(repr(exc))\n"
        "        time.sleep(0.002)\n"
        "worker_thread = threading.Thread(target=worker)\n"
        "worker_thread.start()\n"
        "print('started', flush=True)\n"
        "time.sleep(60)"
    )
    run = bridged.execute(code)
    await anext(run)
    await bridged.interrupt()
    assert (await run.result()).status == "interrupted"
    check = "worker_thread.join(30)\nprint(worker_results == list(range(300)), worker_errors)"
    assert (await bridged.execute(check).result()).output == "True []\n"


async def test_bridge_socket_is_private_and_rejects_a_wrong_token(bridged: KernelSession) -> None:
    address = bridged.host_bridge.address
    assert address.startswith("unix:")
    path = address[len("unix:") :]
    assert os.stat(path).st_mode & 0o777 == 0o600
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(json.dumps({"token": "wrong"}).encode() + b"\n")
    writer.write(json.dumps({"id": 1, "op": "echo", "args": {}}).encode() + b"\n")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 20) == b""  # closed without an answer
    writer.close()


async def test_tcp_fallback_works_with_token(tmp_path: Path) -> None:
    tcp_pool = KernelPool(0, prefer_unix_bridge=False)
    s = await tcp_pool.acquire(cwd=tmp_path)
    try:
        assert s.host_bridge.address.startswith("tcp:127.0.0.1:")

        async def ping(args: dict[str, Any]) -> Any:
            return "pong"

        s.host_bridge.register("ping", ping)
        code = "from kernel_bridge import hostclient as bridge\nprint(bridge.call('ping'))"
        assert (await s.execute(code).result()).output == "pong\n"
    finally:
        await tcp_pool.aclose()


def test_host_client_is_injected_by_source_when_kernel_bridge_is_not_importable() -> None:
    # `python -S` has no site-packages, so the editable kernel_bridge install is invisible to it.
    script = (
        "import sys, types\n"
        "m = types.ModuleType('k'); exec(compile(sys.argv[1], 'k', 'exec'), m.__dict__)\n"
        "try:\n    import kernel_bridge\n    print('importable')\nexcept ImportError:\n    pass\n"
        "m._ensure_hostclient(sys.argv[2])\n"
        "from kernel_bridge import hostclient as bridge\n"
        "print(bridge.call.__name__, bridge.HostError.__name__)\n"
    )
    sources = [Path(kernelside.__file__).read_text(), Path(hostclient.__file__).read_text()]
    out = subprocess.run(
        [sys.executable, "-S", "-c", script, *sources], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "call HostError\n"


def test_host_client_without_a_bridge_raises_host_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTINUAL_ACP_BRIDGE", raising=False)
    monkeypatch.delenv("CONTINUAL_ACP_BRIDGE_TOKEN", raising=False)
    with pytest.raises(hostclient.HostError, match="CONTINUAL_ACP_BRIDGE"):
        hostclient.call("anything")


async def test_bridge_without_a_runtime_dir_makes_a_private_one_and_removes_it() -> None:
    bridge = HostBridge()
    address = await bridge.start()
    socket_path = Path(address[len("unix:") :])
    try:
        assert socket_path.parent.stat().st_mode & 0o777 == 0o700
        assert socket_path.stat().st_mode & 0o777 == 0o600
    finally:
        await bridge.aclose()
    assert not socket_path.parent.exists()
