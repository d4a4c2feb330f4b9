"""jupyter_client's kernel manager, woken by the kernel's exit instead of polling for it.

Every wait for a kernel process to end (the polite shutdown's grace, the wait after a kill) goes
through `KernelManager._async_wait`, which checks the process every 0.1 s: a kernel that exits 20 ms
after its shutdown request was noticed 100 ms later, and each session close, restart and server
exit paid that. Here the wait sleeps on the process's pidfd, which becomes readable the moment the
process ends, then confirms through the provisioner as before. Where there is no pidfd (not Linux,
an old kernel, a process already reaped) it is jupyter_client's poll unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from jupyter_client.manager import AsyncKernelManager

_CONFIRM_INTERVAL = 0.005  # the provisioner's own check once the pidfd said the process ended


def _exit_descriptor(process: Any) -> int | None:
    """A pidfd of `process` this call owns (close it), or None when none can be had safely."""
    if process is None or getattr(process, "returncode", None) is not None:
        return None  # reaped already: its pid may belong to another process now
    own = getattr(process, "exit_fd", None)
    try:
        if own is not None:  # a forked kernel (kernel_template.ForkedProcess) holds its own
            fd = own()
            return None if fd is None else os.dup(fd)
        # An unreaped child of ours (subprocess.Popen): its pid cannot be reused before we reap it.
        return os.pidfd_open(int(process.pid))
    except (AttributeError, OSError, TypeError, ValueError):
        return None


async def wait_for_exit(process: Any) -> bool:
    """Until `process` ends (True), or at once (False) when its end cannot be waited on here."""
    fd = _exit_descriptor(process)
    if fd is None:
        return False
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    try:
        loop.add_reader(fd, ended.set)
    except (NotImplementedError, OSError, ValueError):
        os.close(fd)
        return False
    try:
        await ended.wait()
    finally:
        loop.remove_reader(fd)
        with contextlib.suppress(OSError):
            os.close(fd)
    return True


class ExitAwareKernelManager(AsyncKernelManager):
    """`AsyncKernelManager` whose waits for the kernel's exit wake when it exits."""

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        if await wait_for_exit(getattr(self.provisioner, "process", None)):
            pollinterval = _CONFIRM_INTERVAL
        await super()._async_wait(pollinterval=pollinterval)
