"""Fixtures for the panel tests: stores filled by real refinements and a real panel on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acp_server.panel.run import PanelServer

from .cdp import Browser, Page
from .populate import Populated, populate


@dataclass
class RunningPanel:
    """A panel served from its own thread and event loop (as `ensure_panel` runs it)."""

    server: PanelServer
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def request(
        self, path: str, *, token: str | None = "", body: Any = None, header: bool = True
    ) -> tuple[int, Any]:
        """(status, parsed JSON or text); `token=""` sends the panel's own, None sends none."""
        token = self.server.token if token == "" else token
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if token is not None and header:
            headers["X-Panel-Token"] = token
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw, kind = response.status, response.read(), response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            status, raw, kind = exc.code, exc.read(), exc.headers.get("Content-Type", "")
        text = raw.decode("utf-8")
        return status, json.loads(text) if kind.startswith("application/json") else text

    def get(self, path: str, **kwargs: Any) -> Any:
        status, body = self.request(path, **kwargs)
        assert status == 200, (status, body)
        return body

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


def start_panel(home: Path) -> RunningPanel:
    server = PanelServer(home)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name="panel-under-test", daemon=True)
    thread.start()
    assert ready.wait(60), "the panel did not start"
    return RunningPanel(server, loop, thread)


@pytest.fixture
def populated(tmp_path: Path) -> Populated:
    return populate(tmp_path / "home")


@pytest.fixture
def panel(populated: Populated) -> Iterator[RunningPanel]:
    running = start_panel(populated.home)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # aiohttp's websocket client (the CDP helper) runs on asyncio


@pytest.fixture(scope="module")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browser]:
    """One headless chromium per test module: a start costs more than most of the tests."""
    launched = await Browser.launch(tmp_path_factory.mktemp("chromium") / "profile")
    try:
        yield launched
    finally:
        await launched.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A tab in a browser context of its own: nothing stored by an earlier test's page is seen."""
    tab, context = await browser.isolated_page()
    try:
        yield tab
    finally:
        await browser.dispose(tab, context)


async def open_panel(page: Page, panel: RunningPanel, fragment: str = "timeline") -> None:
    """Load the panel at `#fragment` and wait until its first render is done."""
    await page.navigate(f"{panel.url}#{fragment}")
    await page.wait_for("document.body.dataset.ready === '1'")
