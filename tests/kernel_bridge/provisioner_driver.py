"""Run in a subprocess by test_provisioner.py: one session on a kernelspec's provisioner, results as JSON.

A subprocess because gateway_provisioners reads its settings (GP_SSH_PORT, ...) from the
environment once, at import.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from kernel_bridge import KernelPool
from kernel_bridge.provisioner import ProvisionerLauncher


async def main(kernel_name: str, kernel_dir: str, cwd: str) -> dict[str, object]:
    launcher = ProvisionerLauncher(kernel_name, kernel_dirs=[kernel_dir])
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
    finally:
        await pool.aclose()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
