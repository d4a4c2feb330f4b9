"""Sessions on kernels of a real Jupyter Kernel Gateway (127.0.0.1, random port, token auth)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_support import Gateway, start_gateway, stop_gateway
from kernel_bridge_support import wait_until

from kernel_bridge import Finished, KernelPool, KernelSession, Stream
from kernel_bridge.gateway import OWNER_ENV, GatewayLauncher, RemotePaths
from kernel_bridge.gateway_rest import GatewayError, GatewayRest, GatewaySettings
from kernel_bridge.kernel_ledger import KernelLedger, owner_tag

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    gw = start_gateway(tmp_path_factory.mktemp("gateway"))
    yield gw
    stop_gateway(gw)


def _launcher(gateway: Gateway, tmp: Path, **kwargs: Any) -> GatewayLauncher:
    return GatewayLauncher(
        GatewaySettings(gateway.url, gateway.token), ledger_path=tmp / "ledger.json", **kwargs
    )


@pytest.fixture(scope="module")
async def gw_pool(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelPool]:
    launcher = _launcher(gateway, tmp_path_factory.mktemp("ledger"))
    pool = KernelPool(0, launcher=launcher, snapshot_debounce=0.2, interrupt_grace=2.0)
    await pool.start()
    yield pool
    await pool.aclose()


@pytest.fixture(scope="module")
async def gw_session(
    gw_pool: KernelPool, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[KernelSession]:
    base = tmp_path_factory.mktemp("gwsession")
    s = await gw_pool.acquire(cwd=base, output_dir=base / "out", snapshot_path=base / "snap")
    yield s
    await s.shutdown(final_snapshot=False)


async def _kernel_ids(gateway: Gateway) -> set[str]:
    rest = GatewayRest(GatewaySettings(gateway.url, gateway.token))
    try:
        return {str(k["id"]) for k in await rest.list_kernels()}
    finally:
        await rest.aclose()


async def test_gateway_cell_streams_output_before_it_finishes(gw_session: KernelSession) -> None:
    run = gw_session.execute(
        "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.2)"
    )
    seen: list[str] = []
    async for event in run:
        if isinstance(event, Stream):
            seen.append(event.text)
            if len(seen) == 1:
                assert not run.done  # the first line arrived while the cell was still running
        if isinstance(event, Finished):
            break
    result = await run.result()
    assert result.status == "ok"
    assert "".join(seen) == "line 0\nline 1\nline 2\n"


async def test_gateway_cell_runs_in_the_session_cwd_and_keeps_full_output(gw_session: KernelSession) -> None:
    result = await gw_session.execute("import os\nprint(os.getcwd())\nprint('x' * 5000)").result()
    assert result.status == "ok"
    assert result.output.splitlines()[0] == str(gw_session.options.cwd)
    assert result.full_output_path is not None
    assert ("x" * 5000) in result.full_output_path.read_text()


async def test_gateway_error_carries_the_traceback(gw_session: KernelSession) -> None:
    result = await gw_session.execute("1/0").result()
    assert result.status == "error"
    assert result.error is not None and result.error.ename == "ZeroDivisionError"


async def test_gateway_interrupt_stops_a_sleeping_cell(gw_session: KernelSession) -> None:
    run = gw_session.execute("import time\ntime.sleep(60)")
    await asyncio.wait_for(run.started.wait(), 30)
    await asyncio.sleep(0.3)  # let the kernel enter the sleep (no event marks it)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await gw_session.interrupt()
    result = await run.result()
    assert result.status == "interrupted"
    assert loop.time() - began < 2.0  # stopped by the interrupt, not by a kernel kill after the grace
    assert (await gw_session.execute("print('still here')").result()).output == "still here\n"


async def test_gateway_host_call_from_a_running_cell(gw_session: KernelSession) -> None:
    async def add(args: dict[str, Any]) -> int:
        return int(args["a"]) + int(args["b"])

    gw_session.host_bridge.register("add", add)
    result = await gw_session.execute(
        "from kernel_bridge import hostclient as bridge\nprint(bridge.call('add', a=2, b=3))"
    ).result()
    assert result.output == "5\n"


async def test_gateway_host_call_over_stdin_when_forced(gateway: Gateway, tmp_path: Path) -> None:
    pool = KernelPool(0, launcher=_launcher(gateway, tmp_path), host_transport="stdin")
    try:
        s = await pool.acquire(cwd=tmp_path)
        seen: list[dict[str, Any]] = []

        async def record(args: dict[str, Any]) -> str:
            seen.append(args)
            return "via stdin"

        s.host_bridge.register("record", record)
        code = "import os\nfrom kernel_bridge import hostclient as bridge\nprint(os.environ['CONTINUAL_ACP_BRIDGE'], bridge.call('record', n=1))"
        result = await s.execute(code).result()
        assert result.output == "stdin: via stdin\n"
        assert seen == [{"n": 1}]
    finally:
        await pool.aclose()


async def test_gateway_restart_restores_the_snapshot(gw_session: KernelSession) -> None:
    await gw_session.execute("kept = {'a': [1, 2, 3]}").result()
    report = await gw_session.restart()
    assert "kept" in report
    result = await gw_session.execute("print(kept)").result()
    assert result.output == "{'a': [1, 2, 3]}\n"


async def test_gateway_kernel_death_fails_the_cell_and_the_next_cell_gets_a_fresh_kernel(
    gateway: Gateway, tmp_path: Path
) -> None:
    pool = KernelPool(0, launcher=_launcher(gateway, tmp_path), snapshot_debounce=0.1)
    try:
        s = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "snap")
        await s.execute("survivor = 7").result()
        await s.snapshot()
        result = await s.execute("import os\nos._exit(1)").result()
        assert result.status == "died"
        assert result.error is not None and "gateway" in result.error.evalue
        after = await s.execute("print(survivor)").result()
        assert after.output == "7\n"
        assert after.report is not None and "survivor" in after.report
    finally:
        await pool.aclose()


async def test_gateway_snapshot_is_written_and_read_on_the_kernel_side(
    gateway: Gateway, tmp_path: Path
) -> None:
    kernel_side = tmp_path / "kernel-fs"
    host_dir = tmp_path / "host" / "session-1"
    launcher = _launcher(gateway, tmp_path, paths=RemotePaths(snapshot_root=str(kernel_side)))
    pool = KernelPool(0, launcher=launcher)
    try:
        s = await pool.acquire(cwd=tmp_path, snapshot_path=host_dir)
        await s.execute("value = 'saved remotely'").result()
        manifest = await s.snapshot()
        assert "value" in manifest["saved"]
        assert (kernel_side / "session-1" / "kernel-state.dill").is_file()
        assert not (host_dir / "kernel-state.dill").exists()
        await s.shutdown(final_snapshot=False)
        again = await pool.acquire(cwd=tmp_path, snapshot_path=host_dir)
        report = await again.restore()
        assert report.restored == ["value"]
    finally:
        await pool.aclose()


async def test_gateway_missing_kernel_side_snapshot_restores_nothing(
    gateway: Gateway, tmp_path: Path
) -> None:
    launcher = _launcher(gateway, tmp_path, paths=RemotePaths(snapshot_root=str(tmp_path / "empty")))
    pool = KernelPool(0, launcher=launcher)
    try:
        s = await pool.acquire(cwd=tmp_path, snapshot_path=tmp_path / "s")
        report = await s.restore()
        assert report.snapshot_found is False
    finally:
        await pool.aclose()


async def test_gateway_closing_a_session_deletes_its_kernel(gateway: Gateway, tmp_path: Path) -> None:
    launcher = _launcher(gateway, tmp_path)
    pool = KernelPool(0, launcher=launcher)
    try:
        before = await _kernel_ids(gateway)
        s = await pool.acquire(cwd=tmp_path)
        during = await _kernel_ids(gateway)
        (mine,) = during - before
        await s.shutdown(final_snapshot=False)
        assert mine not in await _kernel_ids(gateway)
        assert KernelLedger(tmp_path / "ledger.json").owned(gateway.url, launcher.owner) == []
    finally:
        await pool.aclose()


async def test_gateway_start_deletes_kernels_left_by_a_dead_server(gateway: Gateway, tmp_path: Path) -> None:
    # A server process that started a kernel and died without cleanup (SIGKILL).
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    rest = GatewayRest(GatewaySettings(gateway.url, gateway.token))
    try:
        orphan = await rest.start_kernel({OWNER_ENV: owner_tag(dead.pid)})
    finally:
        await rest.aclose()
    ledger = KernelLedger(tmp_path / "ledger.json")
    ledger.add(gateway.url, orphan, owner_tag(dead.pid))
    launcher = _launcher(gateway, tmp_path)
    deleted = await launcher.sweep()
    await launcher.aclose()
    assert deleted == [orphan]
    assert orphan not in await _kernel_ids(gateway)


async def test_gateway_sweep_leaves_kernels_of_a_live_server_alone(gateway: Gateway, tmp_path: Path) -> None:
    ledger = KernelLedger(tmp_path / "ledger.json")
    ledger.add(gateway.url, "not-a-real-kernel", owner_tag(os.getppid()))
    launcher = _launcher(gateway, tmp_path)
    assert await launcher.sweep() == []
    await launcher.aclose()
    assert json.loads((tmp_path / "ledger.json").read_text())[0]["kernel_id"] == "not-a-real-kernel"


async def test_gateway_wrong_token_names_the_gateway_and_the_fix(gateway: Gateway, tmp_path: Path) -> None:
    launcher = GatewayLauncher(GatewaySettings(gateway.url, "wrong-token"))
    pool = KernelPool(0, launcher=launcher)
    try:
        with pytest.raises(GatewayError) as caught:
            await pool.acquire(cwd=tmp_path)
    finally:
        await pool.aclose()
    message = str(caught.value)
    assert gateway.url in message
    assert "CONTINUAL_ACP_GATEWAY_TOKEN" in message


async def test_gateway_that_is_down_names_the_address_and_the_fix(tmp_path: Path) -> None:
    launcher = GatewayLauncher(GatewaySettings("http://127.0.0.1:9", "t"))
    with pytest.raises(GatewayError) as caught:
        await launcher.check()
    await launcher.aclose()
    assert "http://127.0.0.1:9 is not reachable" in str(caught.value)
    assert "CONTINUAL_ACP_GATEWAY_URL" in str(caught.value)


async def test_gateway_websocket_without_the_token_is_refused(gateway: Gateway, tmp_path: Path) -> None:
    from kernel_bridge.gateway_channels import GatewayChannels

    rest = GatewayRest(GatewaySettings(gateway.url, gateway.token))
    kernel_id = await rest.start_kernel({})
    try:
        channels = GatewayChannels(GatewaySettings(gateway.url, None), kernel_id)
        with pytest.raises(GatewayError, match="CONTINUAL_ACP_GATEWAY_TOKEN"):
            await channels.connect()
    finally:
        await rest.delete(kernel_id)
        await rest.aclose()


async def test_gateway_pool_hands_out_a_warm_kernel(gateway: Gateway, tmp_path: Path) -> None:
    pool = KernelPool(1, launcher=_launcher(gateway, tmp_path), refill_delay=60)
    try:
        await pool.start()
        await wait_until(lambda: pool.ready_count == 1, timeout=60)
        s = await pool.acquire(cwd=tmp_path)
        assert pool.cold_starts == 0
        assert (await s.execute("print(1+1)").result()).output == "2\n"
    finally:
        await pool.aclose()


def _gateway_env(gateway: Gateway, tmp: Path, token: str) -> dict[str, str]:
    return {
        "HOME": str(tmp),
        "CONTINUAL_ACP_HOME": str(tmp / "data"),
        "CONTINUAL_ACP_KERNEL": "gateway",
        "CONTINUAL_ACP_GATEWAY_URL": gateway.url,
        "CONTINUAL_ACP_GATEWAY_TOKEN": token,
    }


async def test_doctor_backend_check_passes_against_the_gateway(gateway: Gateway, tmp_path: Path) -> None:
    from acp_server.console.doctor import check_kernel_backend
    from agent_core import load_config

    result = await check_kernel_backend(load_config(_gateway_env(gateway, tmp_path, gateway.token)))
    assert result.ok, result
    assert result.name == "kernel backend (gateway)"
    assert f"gateway {gateway.url} answers" in result.detail


async def test_doctor_backend_check_fails_on_a_wrong_token_with_the_fix(
    gateway: Gateway, tmp_path: Path
) -> None:
    from acp_server.console.doctor import check_kernel_backend
    from agent_core import load_config

    result = await check_kernel_backend(load_config(_gateway_env(gateway, tmp_path, "wrong")))
    assert not result.ok
    assert "CONTINUAL_ACP_GATEWAY_TOKEN" in result.detail


async def test_doctor_kernel_check_really_starts_a_gateway_kernel(gateway: Gateway, tmp_path: Path) -> None:
    from acp_server.console.doctor import check_kernel
    from agent_core import load_config

    before = await _kernel_ids(gateway)
    result = await check_kernel(load_config(_gateway_env(gateway, tmp_path, gateway.token)))
    assert result.ok, result
    assert await _kernel_ids(gateway) == before  # the doctor's kernel was deleted again


async def test_gateway_session_reports_the_backend_it_runs_on(
    gw_session: KernelSession, gateway: Gateway
) -> None:
    assert gw_session.guarantees.backend == "gateway"
    assert gateway.url in gw_session.guarantees.describe()


async def test_pool_backend_check_names_a_gateway_that_is_down() -> None:
    pool = KernelPool(0, launcher=GatewayLauncher(GatewaySettings("http://127.0.0.1:9", "t")))
    with pytest.raises(GatewayError, match="not reachable"):
        await pool.check_backend()
    await pool.aclose()


_CRASHING_SERVER = """
import asyncio, sys
from pathlib import Path
from kernel_bridge import KernelPool
from kernel_bridge.gateway import GatewayLauncher
from kernel_bridge.gateway_rest import GatewaySettings

async def main():
    launcher = GatewayLauncher(GatewaySettings(sys.argv[1], sys.argv[2]), ledger_path=Path(sys.argv[3]))
    pool = KernelPool(0, launcher=launcher)
    session = await pool.acquire(cwd=sys.argv[4])
    print(session._kernel.kernel_id, flush=True)
    await asyncio.Event().wait()  # until SIGKILLed: no cleanup runs

asyncio.run(main())
"""


async def test_gateway_kernels_of_a_sigkilled_server_are_deleted_by_the_next_start(
    gateway: Gateway, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.json"
    server = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_SERVER, gateway.url, gateway.token, str(ledger), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        kernel_id = await asyncio.wait_for(asyncio.to_thread(server.stdout.readline), 120)
        kernel_id = kernel_id.strip()
        assert kernel_id in await _kernel_ids(gateway)
    finally:
        server.kill()
        server.wait()
    assert kernel_id in await _kernel_ids(gateway)  # SIGKILL: the server could not delete it
    pool = KernelPool(0, launcher=_launcher(gateway, tmp_path))
    try:
        s = await pool.acquire(cwd=tmp_path)  # the first start sweeps
        assert kernel_id not in await _kernel_ids(gateway)
        await s.shutdown(final_snapshot=False)
    finally:
        await pool.aclose()


async def test_gateway_pool_close_deletes_its_warm_kernel(gateway: Gateway, tmp_path: Path) -> None:
    before = await _kernel_ids(gateway)
    pool = KernelPool(1, launcher=_launcher(gateway, tmp_path))
    await pool.start()
    await wait_until(lambda: pool.ready_count == 1, timeout=60)
    assert len(await _kernel_ids(gateway) - before) == 1
    await pool.aclose()
    assert await _kernel_ids(gateway) - before == set()


async def test_session_new_fails_naming_a_gateway_that_is_down(tmp_path: Path) -> None:
    from agent_core import Agent, KernelBackendUnavailable, NoEditor, load_config

    env = {
        "HOME": str(tmp_path),
        "CONTINUAL_ACP_HOME": str(tmp_path / "data"),
        "CONTINUAL_ACP_KERNEL": "gateway",
        "CONTINUAL_ACP_GATEWAY_URL": "http://127.0.0.1:9",
    }
    agent = Agent(load_config(env))
    try:
        with pytest.raises(KernelBackendUnavailable) as caught:
            await agent.new_session(str(tmp_path), NoEditor())
    finally:
        await agent.aclose()
    assert caught.value.backend == "gateway" and isinstance(caught.value.__cause__, GatewayError)
    assert "http://127.0.0.1:9 is not reachable" in str(caught.value)
    assert "CONTINUAL_ACP_GATEWAY_URL" in str(caught.value)


async def test_session_new_fails_naming_the_token_when_the_gateway_refuses_it(
    gateway: Gateway, tmp_path: Path
) -> None:
    from agent_core import Agent, KernelBackendUnavailable, NoEditor, load_config

    agent = Agent(load_config(_gateway_env(gateway, tmp_path, "wrong")))
    try:
        with pytest.raises(KernelBackendUnavailable, match="CONTINUAL_ACP_GATEWAY_TOKEN"):
            await agent.new_session(str(tmp_path), NoEditor())
    finally:
        await agent.aclose()


async def test_gateway_start_request_carries_kernel_variables_and_the_owner_tag(
    gateway: Gateway, tmp_path: Path
) -> None:
    launcher = _launcher(gateway, tmp_path)
    # base_env reaches only the start request (the setup cell applies the session's own env).
    pool = KernelPool(0, launcher=launcher, base_env={"KERNEL_PROBE": "from-start", "PLAIN_VAR": "no"})
    try:
        s = await pool.acquire(cwd=tmp_path)
        code = "import os\nprint(os.environ.get('KERNEL_PROBE'), os.environ.get('PLAIN_VAR'), os.environ['KERNEL_CONTINUAL_ACP_OWNER'])"
        result = await s.execute(code).result()
    finally:
        await pool.aclose()
    assert result.output == f"from-start None {launcher.owner}\n"


async def test_gateway_that_stops_answering_ends_the_cell_as_died(tmp_path: Path) -> None:
    (tmp_path / "gw").mkdir()
    own = start_gateway(tmp_path / "gw")  # its own gateway: this test freezes it
    launcher = _launcher(own, tmp_path)
    pool = KernelPool(0, launcher=launcher, heartbeat_timeout=3.0)
    try:
        s = await pool.acquire(cwd=tmp_path)
        run = s.execute("import time\ntime.sleep(60)")
        await asyncio.wait_for(run.started.wait(), 30)
        os.kill(own.process.pid, signal.SIGSTOP)
        try:
            result = await asyncio.wait_for(run.result(), 50)
            # Reported while the gateway is still frozen: its DELETE waits in the background.
            pending = launcher.pending_deletes
        finally:
            os.kill(own.process.pid, signal.SIGCONT)
        assert result.status == "died"
        assert result.error is not None and "no heartbeat for 3 s" in result.error.evalue
        assert pending == 1
    finally:
        await pool.aclose()
        stop_gateway(own)
