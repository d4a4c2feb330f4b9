"""Loading kernel_bridge's kernel-side module into a kernel, ahead of time when pooled.

A pooled kernel gets the module (and dill, used by snapshots) while it waits in the pool, so
taking it for a session only has to apply the session's cwd/env/sys.path.
"""

from __future__ import annotations

import functools
import json
import queue
import time
from pathlib import Path
from typing import Any

from kernel_bridge import hostclient, kernelside
from kernel_bridge.launcher import RunningKernel

MODULE = "_continual_acp_kernel"


@functools.cache
def _sources() -> tuple[str, str]:
    return (
        Path(kernelside.__file__).read_text(encoding="utf-8"),
        Path(hostclient.__file__).read_text(encoding="utf-8"),
    )


@functools.cache
def load_code() -> str:
    """Cell code that loads the kernel-side module once and binds it as `_cak_`."""
    source, _ = _sources()
    return (
        "def __cacp_boot(src):\n"
        "    import sys, types\n"
        f"    if {MODULE!r} in sys.modules:\n"
        f"        return sys.modules[{MODULE!r}]\n"
        f"    m = types.ModuleType({MODULE!r})\n"
        "    exec(compile(src, '<continual-acp kernel side>', 'exec'), m.__dict__)\n"
        "    sys.modules[m.__name__] = m\n"
        "    try:\n"
        "        import dill  # snapshots need it; importing now keeps the first snapshot fast\n"
        "    except ImportError:\n"
        "        pass\n"
        "    return m\n"
        f"_cak_ = __cacp_boot({source!r})\n"
        "del __cacp_boot\n"
    )


def setup_code(config: dict[str, Any]) -> str:
    """Cell code applying a session's cwd/env/sys.path and making the host client importable."""
    _, client_source = _sources()
    payload = {**config, "hostclient_source": client_source}
    return load_code() + f"_cak_.setup(get_ipython(), __import__('json').loads({json.dumps(payload)!r}))\n"


async def preload(kernel: RunningKernel, timeout: float = 60.0) -> bool:
    """Load the kernel-side module into a kernel nobody uses yet; True when it worked."""
    client = kernel.client
    msg_id = client.execute(load_code(), silent=True, store_history=False, allow_stdin=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reply = await client.get_shell_msg(timeout=0.5)
        except queue.Empty:
            if kernel.exit_code() is not None:
                return False
            continue
        if reply.get("parent_header", {}).get("msg_id") == msg_id:
            return bool(reply.get("content", {}).get("status") == "ok")
    return False
