"""Startup speed: the modules that answer `initialize` do not import jsonrpcserver (and jsonschema)."""

from __future__ import annotations

import subprocess
import sys


def test_the_initialize_path_does_not_import_jsonrpcserver_or_jsonschema() -> None:
    code = (
        "import sys\n"
        "import acp_server.cli, acp_server.server, acp_server.methods, acp_server.harness.methods\n"
        "import acp_server.transport, acp_server.registry\n"
        "print(sorted(m for m in ('jsonrpcserver', 'jsonschema') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
