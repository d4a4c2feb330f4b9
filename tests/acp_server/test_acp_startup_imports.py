"""Startup speed: what is (not) imported before the first `initialize` is answered (no jsonrpcserver,
jsonschema or pydantic: the wire models and the `_harness/*` params models load after it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_the_initialize_path_does_not_import_jsonrpcserver_jsonschema_or_pydantic() -> None:
    code = (
        "import sys\n"
        "import acp_server.cli, acp_server.server, acp_server.methods, acp_server.harness.methods\n"
        "import acp_server.transport, acp_server.registry, acp_server.params\n"
        "print(sorted(m for m in ('jsonrpcserver', 'jsonschema', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# Each of these costs from ~5 ms (logging, dataclasses) to ~0.4 s (agent_core's harness models).
NOT_BEFORE_INITIALIZE = (
    "acp",
    "acp_server.capabilities",
    "acp_server.methods",
    "acp_server.transport",
    "agent_core",
    "anyio",
    "argparse",
    "asyncio",
    "dataclasses",
    "harness_store",
    "importlib.metadata",
    "jsonrpcserver",
    "jsonschema",
    "jupyter_client",
    "kernel_bridge",
    "logging",
    "openai",
    "pydantic",
    "zmq",
)

# The real `continual-acp` entry point, stopped the moment its early answer is written.
SPY = """
import json, os, sys
import acp_server.early_initialize as early
answer = early.answer_first_initialize
def spy(*args, **kwargs):
    started = answer(*args, **kwargs)
    os.write(2, (json.dumps([started.params is not None, sorted(sys.modules)]) + "\\n").encode())
    os._exit(0)
early.answer_first_initialize = spy
from acp_server.cli import main
main([])
"""


def test_nothing_heavy_is_imported_before_the_first_initialize_is_answered() -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    out = subprocess.run(
        [sys.executable, "-c", SPY],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    answered, modules = json.loads(out.stderr.strip().splitlines()[-1])
    assert answered is True
    assert sorted(set(NOT_BEFORE_INITIALIZE) & set(modules)) == []
    assert json.loads(out.stdout)["id"] == 1  # the answer itself went to the real stdout


# `serve` replaced by a probe that imports what the real one imports (jsonrpcserver -> jsonschema).
SERVE_PROBE = """
import sys

import pytest
import acp_server.server as server
def probe(**_kwargs):
    import jsonrpcserver, jsonschema
    jsonschema.validate({"jsonrpc": "2.0"}, {"type": "object", "required": ["jsonrpc"]})
    print(sys.modules.get("rfc3987_syntax", "absent"))
    return 0
server.serve_stdio = probe
from acp_server.cli import main
raise SystemExit(main([]))
"""


def test_the_server_keeps_jsonschemas_lark_grammar_backend_out_and_still_validates() -> None:
    import importlib.util

    if importlib.util.find_spec("rfc3987_syntax") is None:
        pytest.skip("rfc3987-syntax is not installed here: there is nothing to keep out")
    out = subprocess.run([sys.executable, "-c", SERVE_PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"  # blocked (a `None` entry), not imported
