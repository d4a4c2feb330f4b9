"""The eval's ACP client: the shared one (`acp_driver`) over a child server's stdio, every frame recorded.

The eval never imports the server: it starts `python -m acp_server` (or the command it is given) and
speaks newline-delimited JSON-RPC on the child's stdin/stdout. Each message in either direction is
appended to the session's frame log (`frames.jsonl`: `{"t", "dir": "in"|"out", "msg"}`), which is the
transcript the results are recomputed from. Permission requests are answered "allow once" (the eval
runs in `auto` mode with refinement review off, so they are rare); `fs/*` requests read and write
the real files under the session's working directory (the task repository).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from acp_driver import AsyncClient, ClientCore, ClientError, ClientPolicy
from acp_driver.core import FrameLog

__all__ = ["EXIT_TIMEOUT_S", "REQUEST_TIMEOUT_S", "AcpStdioClient", "ClientError"]

EXIT_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 120.0


def frame_logger(frames: TextIO) -> FrameLog:
    """The frame-log hook that writes `frames.jsonl` lines."""

    def log(direction: str, message: dict[str, Any]) -> None:
        frames.write(json.dumps({"t": time.time(), "dir": direction, "msg": message}) + "\n")

    return log


class AcpStdioClient:
    """The shared asyncio client with the eval's policy, frame log and request timeout."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    @classmethod
    async def spawn(
        cls, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, frames: TextIO, stderr: TextIO
    ) -> AcpStdioClient:
        core = ClientCore(ClientPolicy(root=cwd), frame_log=frame_logger(frames))
        client = await AsyncClient.spawn(
            argv, env=env, cwd=cwd, stderr=stderr, core=core, exit_timeout=EXIT_TIMEOUT_S
        )
        return cls(client)

    @property
    def updates(self) -> list[dict[str, Any]]:
        """Every session/update's params, in arrival order."""
        return self._client.updates

    async def request(
        self, method: str, params: Mapping[str, Any], *, timeout: float = REQUEST_TIMEOUT_S
    ) -> dict[str, Any]:
        return await self._client.request(method, params, timeout=timeout)

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        await self._client.notify(method, params)

    async def close(self) -> int:
        """End of input (how an editor quits), then wait for the exit; a hung server is killed."""
        return await self._client.close()

    def kill(self) -> None:
        self._client.kill()
