"""A gateway kernel's silence counts from the check the gateway has not answered, in flight or
failed: a frozen gateway is found `heartbeat_timeout` after that check began, not after the check's
own timeout with the heartbeat timeout again on top. The gateway here is a stand-in whose kernel
check never answers until told to (the real frozen gateway: test_gateway.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kernel_bridge import gateway
from kernel_bridge.gateway import GatewayError, GatewayKernel

pytestmark = pytest.mark.anyio


class _Rest:
    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.answer: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()

    async def kernel(self, kernel_id: str) -> dict[str, Any] | None:
        self.asked.set()
        return await self.answer


class _Launcher:
    def __init__(self) -> None:
        self.rest = _Rest()
        self.deleted_soon: list[str] = []

    def delete_soon(self, kernel_id: str) -> None:
        self.deleted_soon.append(kernel_id)


class _Channels:
    async def aclose(self) -> None:
        return None


async def test_an_unanswered_check_counts_as_silence_from_when_it_was_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway, "_MONITOR_INTERVAL", 0.0)
    monkeypatch.setattr(gateway, "_MONITOR_TIMEOUT", 60.0)
    launcher = _Launcher()
    kernel = GatewayKernel(launcher, "k1", _Channels(), tmp_path / "log")  # type: ignore[arg-type]
    await asyncio.wait_for(launcher.rest.asked.wait(), 10)
    first = kernel.heartbeat_silence()
    await asyncio.sleep(0.05)  # the silence of a check in flight grows with the clock
    assert kernel.heartbeat_silence() > first > 0
    launcher.rest.answer.set_exception(GatewayError("no answer"))
    for _ in range(100):  # the watch takes the failure at its next step on this loop
        if kernel._silent_since is not None:
            break
        await asyncio.sleep(0)
    assert kernel._silent_since is not None
    assert kernel.heartbeat_silence() > first  # failed: still counted from when it was asked
    await kernel.kill()
    assert launcher.deleted_soon == ["k1"]  # a silent gateway's DELETE goes on in the background
