"""The panel costs the ACP server nothing at startup: aiohttp loads only when a panel starts."""

from __future__ import annotations

import subprocess
import sys


def test_the_server_startup_path_does_not_import_aiohttp() -> None:
    code = (
        "import sys, acp_server.cli, acp_server.server, acp_server.panel.run, acp_server.panel.sources;"
        "print('aiohttp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
