"""Startup speed: the modules that answer `initialize` do not import jsonrpcserver (and jsonschema),
nor pydantic (the wire models and the `_harness/*` params models load after `initialize`)."""

from __future__ import annotations

import subprocess
import sys


def test_the_initialize_path_does_not_import_jsonrpcserver_jsonschema_or_pydantic() -> None:
    code = (
        "import sys\n"
        "import acp_server.cli, acp_server.server, acp_server.methods, acp_server.harness.methods\n"
        "import acp_server.transport, acp_server.registry, acp_server.params\n"
        "print(sorted(m for m in ('jsonrpcserver', 'jsonschema', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
