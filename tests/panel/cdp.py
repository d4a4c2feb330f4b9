"""A tiny Chrome DevTools Protocol client: Debian's chromium, headless, over aiohttp's websocket.

`Browser.launch(tmp)` starts `chromium --headless=new --remote-debugging-port=0` and reads the
DevTools URL it prints on stderr; `browser.isolated_page()` opens a tab in a browser context of its
own (what a fresh profile would give, without starting another chromium); `page.evaluate(js)`, `page.navigate(url)`, `page.screenshot()`
and `page.wait_for(js_condition)` are all a test needs. Waiting happens inside the page: a promise
that re-checks the condition on every animation frame and rejects at its deadline (no sleeps here).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp

_DEVTOOLS = re.compile(r"DevTools listening on (ws://\S+)")


class CdpError(RuntimeError):
    """The browser answered a command with an error, or a page-side wait timed out."""


def chromium_path() -> str | None:
    """The system chromium (Debian's package), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """One page target's DevTools session."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._next = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self._event_waiters: list[tuple[str, asyncio.Future[dict[str, Any]]]] = []
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            body = json.loads(message.data)
            if "id" in body:
                future = self._waiting.pop(body["id"], None)
                if future is not None and not future.done():
                    future.set_result(body)
                continue
            self.events.append(body)
            for method, waiter in list(self._event_waiters):
                if body.get("method") == method and not waiter.done():
                    waiter.set_result(body)
                    self._event_waiters.remove((method, waiter))
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(CdpError("the DevTools connection closed"))

    async def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0) -> Any:
        """Send one command; its `result` (raises `CdpError` on an error answer)."""
        self._next += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        await self._ws.send_str(json.dumps({"id": self._next, "method": method, "params": params or {}}))
        body = await asyncio.wait_for(future, timeout)
        if "error" in body:
            raise CdpError(f"{method}: {body['error']}")
        return body.get("result", {})

    def next_event(self, method: str) -> asyncio.Future[dict[str, Any]]:
        """A future for the next event named `method` (create it before causing the event)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._event_waiters.append((method, future))
        return future

    async def evaluate(self, expression: str, timeout: float = 60.0) -> Any:
        """Evaluate JS in the page (promises awaited); the value, by value."""
        result = await self.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"page error: {text}")
        return result.get("result", {}).get("value")

    async def wait_for(self, condition: str, timeout: float = 30.0) -> Any:
        """Wait until the JS expression `condition` is truthy (checked every frame); its value."""
        script = (
            "new Promise((resolve, reject) => {"
            f"  const deadline = performance.now() + {timeout * 1000:.0f};"
            "  const check = () => {"
            "    let value; try { value = (" + condition + "); } catch (e) { value = undefined; }"
            "    if (value) return resolve(value);"
            "    if (performance.now() > deadline) return reject(new Error("
            + json.dumps("timed out waiting for: " + condition)
            + "));"
            "    setTimeout(check, 16);"
            "  };"
            "  check();"
            "})"
        )
        return await self.evaluate(script, timeout=timeout + 30)

    async def navigate(self, url: str) -> None:
        """Load `url` and wait for its load event."""
        loaded = self.next_event("Page.loadEventFired")
        await self.call("Page.navigate", {"url": url})
        await asyncio.wait_for(loaded, 60)

    async def screenshot(self, path: Path, *, width: int = 1400, height: int = 900) -> None:
        """A PNG of the viewport at `width`×`height` CSS pixels."""
        await self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        shot = await self.call("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))

    async def close(self) -> None:
        await self._ws.close()
        self._reader.cancel()


class Browser:
    """A headless chromium process and the HTTP session its DevTools websockets run on."""

    def __init__(
        self, proc: subprocess.Popen[str], endpoint: str, http: aiohttp.ClientSession, browser_ws: str = ""
    ) -> None:
        self.proc = proc
        self.endpoint = endpoint  # http://127.0.0.1:<port>
        self.http = http
        self.browser_ws = browser_ws  # the browser target's DevTools websocket
        self.pages: list[Page] = []
        self._browser: Page | None = None  # a session on the browser target (contexts are made there)

    @classmethod
    async def launch(cls, profile: Path, *, timeout: float = 60.0) -> Browser:
        binary = chromium_path()
        if binary is None:
            raise CdpError("chromium is not installed (apt-get install chromium)")
        args = [
            binary,
            "--headless=new",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            "--window-size=1400,900",
            "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # chromium refuses to run as root with its sandbox
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, name="chromium-stderr", daemon=True).start()
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                proc.kill()
                raise CdpError("chromium printed no DevTools URL:\n" + "".join(seen[-20:]))
            try:
                line = await asyncio.to_thread(lines.get, True, remaining)
            except queue.Empty:
                continue
            if line is None:
                raise CdpError("chromium exited before its DevTools URL:\n" + "".join(seen[-20:]))
            seen.append(line)
            match = _DEVTOOLS.search(line)
            if match:
                ws_url = match.group(1)
                break
        endpoint = "http://" + ws_url.split("/")[2]
        return cls(proc, endpoint, aiohttp.ClientSession(), ws_url)

    async def new_page(self) -> Page:
        """A fresh tab, with Page and Runtime events on."""
        async with self.http.put(f"{self.endpoint}/json/new?about:blank") as response:
            target = await response.json()
        ws = await self.http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=64 * 1024 * 1024)
        page = Page(ws)
        await page.call("Page.enable")
        await page.call("Runtime.enable")
        self.pages.append(page)
        return page

    async def isolated_page(self) -> tuple[Page, str]:
        """A tab in a browser context of its own (no cookies, storage or cache shared with any other
        tab), and that context's id for `dispose`: a fresh profile without a fresh browser."""
        if self._browser is None:
            ws = await self.http.ws_connect(self.browser_ws, max_msg_size=64 * 1024 * 1024)
            self._browser = Page(ws)
        context = (await self._browser.call("Target.createBrowserContext"))["browserContextId"]
        target = await self._browser.call(
            "Target.createTarget", {"url": "about:blank", "browserContextId": context}
        )
        ws = await self.http.ws_connect(
            f"ws://{self.endpoint.split('//', 1)[1]}/devtools/page/{target['targetId']}",
            max_msg_size=64 * 1024 * 1024,
        )
        page = Page(ws)
        await page.call("Page.enable")
        await page.call("Runtime.enable")
        return page, context

    async def dispose(self, page: Page, context: str) -> None:
        """Close `page` and its browser context (its tabs and everything they stored)."""
        await page.close()
        assert self._browser is not None
        await self._browser.call("Target.disposeBrowserContext", {"browserContextId": context})

    async def close(self) -> None:
        for page in self.pages:
            await page.close()
        if self._browser is not None:
            await self._browser.close()
        await self.http.close()
        self.proc.terminate()
        try:
            await asyncio.to_thread(self.proc.wait, 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait, 30)
