"""Regenerate docs/harness-panel.png (light) and docs/harness-panel-dark.png from real refinements.

    .venv/bin/python tests/panel/make_screenshot.py [docs]

Not a test: it fills a temporary data home with `populate()`, serves the panel, opens the timeline
with one refinement's details in headless chromium and captures the viewport in both color schemes.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.panel.cdp import Browser  # noqa: E402
from tests.panel.conftest import start_panel  # noqa: E402
from tests.panel.populate import populate  # noqa: E402


async def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        populated = populate(Path(tmp) / "home")
        panel = start_panel(populated.home)
        browser = await Browser.launch(Path(tmp) / "profile")
        try:
            page = await browser.new_page()
            await page.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            )
            await page.navigate(f"{panel.url}#refinement/{populated.ids['refused']}")
            await page.wait_for(
                "document.body.dataset.ready === '1' && document.querySelector('#detail pre.diff')"
            )
            # The home is a temp dir: show the usual location instead of /tmp/...
            await page.evaluate(
                "document.getElementById('home').textContent = '~/.local/share/continual-acp'"
            )
            for scheme, name in (("light", "harness-panel.png"), ("dark", "harness-panel-dark.png")):
                await page.call(
                    "Emulation.setEmulatedMedia",
                    {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
                )
                await page.wait_for(f"matchMedia('(prefers-color-scheme: {scheme})').matches")
                await page.screenshot(out / name)
                print(f"wrote {out / name} ({(out / name).stat().st_size // 1024} KiB)")
        finally:
            await browser.close()
            panel.stop()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs"))
