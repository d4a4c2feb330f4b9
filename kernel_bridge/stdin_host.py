"""Host calls over the kernel's stdin channel: the bridge transport that crosses a gateway.

A kernel on another machine cannot reach the host's Unix socket. While a cell runs with
`allow_stdin`, the kernel may send `input_request`s on its stdin channel, and every Jupyter
gateway proxies them. The kernel side (`hostclient`) sends a host call as an input_request whose
prompt starts with `STDIN_PREFIX`; `serve_stdin` answers it with the host's JSON reply. Any other
prompt (the user's own `input()`) gets an empty answer and a notice, since nobody is there to type.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from kernel_bridge.hostbridge import HostBridge
from kernel_bridge.hostclient import ADDRESS_VAR, STDIN_PREFIX, STDIN_VAR
from kernel_bridge.launcher import RunningKernel

log = logging.getLogger(__name__)


def stdin_environment(mode: str) -> dict[str, str]:
    """Kernel variables for a stdin mode: "fallback" (socket first) or "only" (stdin forced)."""
    env = {STDIN_VAR: "1"}
    if mode == "only":
        env[ADDRESS_VAR] = "stdin:"
    return env


async def serve_stdin(kernel: RunningKernel, bridge: HostBridge, notice: Callable[[str], None]) -> None:
    """Answer the kernel's input_requests until its channel closes (a task per kernel)."""
    client: Any = kernel.client
    while True:
        try:
            msg = await client.get_stdin_msg()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling() > 0:
                raise
            return  # zmq cancelled the receive: the kernel was killed
        except Exception as exc:  # the channel closed under us: the kernel is gone
            log.debug("stdin server stopped: %s", exc)
            return
        if msg.get("header", {}).get("msg_type") != "input_request":
            continue
        prompt = str(msg.get("content", {}).get("prompt", ""))
        if prompt.startswith(STDIN_PREFIX):
            reply = await bridge.answer(prompt[len(STDIN_PREFIX) :].encode("utf-8"))
            answer = json.dumps(reply)
        else:
            notice("[input() is not available to the agent's cells: it returned an empty string]\n")
            answer = ""
        try:
            client.input(answer)
        except Exception as exc:  # the kernel went away meanwhile
            log.debug("answering the kernel's input_request failed: %s", exc)
            return
