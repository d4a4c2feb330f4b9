"""A stand-in for the server process: a warm pool and a session, prints what to watch, then waits.

Used by test_orphans.py, which kills this process with SIGTERM or SIGKILL and checks that no kernel
(the session's, the pool's warm one) and no child of a kernel outlives it. The printed line is
`<session kernel pid> <pid of a child the kernel started> <pool runtime dir>`.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from kernel_bridge import KernelPool


async def main() -> None:
    pool = KernelPool(1, refill_delay=0)
    await pool.start()
    session = await pool.acquire(cwd=tempfile.gettempdir())
    result = await session.execute(
        "import subprocess\nchild = subprocess.Popen(['sleep', '300'])\nprint(child.pid)"
    ).result()
    # Wait for the refilled warm kernel too, so the test also covers a kernel nobody uses yet.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while pool.ready_count < 1 and loop.time() < deadline:
        await asyncio.sleep(0.05)
    print(f"{session.kernel_pid} {result.output.strip()} {pool.runtime_dir}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
