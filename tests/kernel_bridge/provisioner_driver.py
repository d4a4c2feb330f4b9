"""Run in a subprocess by test_provisioner.py: one session on a kernelspec's provisioner, results as JSON.

A subprocess because gateway_provisioners reads its settings (GP_SSH_PORT, ...) from the
environment once, at import. Modes: `KERNEL DIR CWD LEDGER` runs a session; `hold KERNEL DIR CWD LEDGER`
starts a kernel recorded in LEDGER, prints its pid and waits (to be SIGKILLed); `sweep KERNEL DIR
LEDGER` is the next start: a pool's start sweeps the ledger, and the ids ended are printed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from kernel_bridge import KernelPool
from kernel_bridge.provisioner import ProvisionerLauncher


async def main(kernel_name: str, kernel_dir: str, cwd: str, ledger: str) -> dict[str, object]:
    launcher = ProvisionerLauncher(kernel_name, kernel_dirs=[kernel_dir], ledger_path=Path(ledger))
    pool = KernelPool(0, launcher=launcher, interrupt_grace=5.0, startup_timeout=90)
    out: dict[str, object] = {"provisioner": launcher.provisioner_name()}
    try:
        session = await pool.acquire(cwd=cwd, snapshot_path=Path(cwd) / "snap")
        result = await session.execute("import os\nvalue = 21 * 2\nprint(value, os.getcwd())").result()
        out["first"] = [result.status, result.output]
        run = session.execute("import time\ntime.sleep(60)")
        await run.started.wait()
        await asyncio.sleep(0.5)  # let the kernel enter the sleep
        began = time.monotonic()
        await session.interrupt()
        interrupted = await run.result()
        out["interrupt"] = [interrupted.status, interrupted.error.ename if interrupted.error else None]
        out["interrupt_seconds"] = time.monotonic() - began
        report = await session.restart()
        out["restart_report"] = report
        after = await session.execute("print(value)").result()
        out["after_restart"] = [after.status, after.output]
        out["ledger_while_running"] = [e["kernel_id"] for e in json.loads(Path(ledger).read_text())]
    finally:
        await pool.aclose()
    return out


async def hold(kernel_name: str, kernel_dir: str, cwd: str, ledger: str) -> None:
    launcher = ProvisionerLauncher(kernel_name, kernel_dirs=[kernel_dir], ledger_path=Path(ledger))
    pool = KernelPool(0, launcher=launcher, startup_timeout=90)
    session = await pool.acquire(cwd=cwd)
    result = await session.execute("import os\nprint(os.getpid())").result()
    print(json.dumps({"status": result.status, "pid": int(result.output)}), flush=True)
    # Held until the test SIGKILLs this process: no cleanup of any kind runs.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def sweep(kernel_name: str, kernel_dir: str, ledger: str) -> dict[str, object]:
    launcher = ProvisionerLauncher(kernel_name, kernel_dirs=[kernel_dir], ledger_path=Path(ledger))
    pool = KernelPool(0, launcher=launcher)
    await pool.start()
    assert launcher.sweep_task is not None, "the pool's start did not begin the sweep"
    try:
        ended = await launcher.sweep_task
    finally:
        await pool.aclose()
    return {"ended": ended}


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        asyncio.run(hold(*sys.argv[2:6]))
    elif sys.argv[1] == "sweep":
        print(json.dumps(asyncio.run(sweep(*sys.argv[2:5]))))
    else:
        print(json.dumps(asyncio.run(main(*sys.argv[1:5]))))
