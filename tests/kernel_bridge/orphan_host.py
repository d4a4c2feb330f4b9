"""A stand-in for the server process: starts a pool and a session, prints pids, then waits.

Used by test_orphans.py, which kills this process with SIGTERM or SIGKILL and checks that the
kernel (and, for SIGTERM, the kernel's own child) does not outlive it.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from kernel_bridge import KernelPool


async def main() -> None:
    pool = KernelPool(1)
    await pool.start()
    session = await pool.acquire(cwd=tempfile.gettempdir())
    result = await session.execute(
        "import subprocess\nchild = subprocess.Popen(['sleep', '300'])\nprint(child.pid)"
    ).result()
    print(f"{session.kernel_pid} {result.output.strip()}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
