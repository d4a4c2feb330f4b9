"""Startup speed: what is (not) imported before the first `initialize` is answered (no jsonrpcserver,
jsonschema or pydantic: the wire models and the `_harness/*` params models load after it), and
before the first session/new is answered (no refinement, harness_store or pydantic either)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from acp_client import server_env


def test_the_initialize_path_does_not_import_jsonrpcserver_jsonschema_or_pydantic() -> None:
    code = (
        "import sys\n"
        "import acp_server.cli, acp_server.server, acp_server.sessions.methods, acp_server.harness.methods\n"
        "import acp_server.protocol.transport, acp_server.protocol.registry, acp_server.protocol.params\n"
        "print(sorted(m for m in ('jsonrpcserver', 'jsonschema', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# Each of these costs from ~5 ms (logging, dataclasses) to ~0.4 s (agent_core's harness models).
NOT_BEFORE_INITIALIZE = (
    "acp",
    "acp_server.protocol.capabilities",
    "acp_server.sessions.methods",
    "acp_server.protocol.transport",
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
import acp_server.process.early_initialize as early
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


# Deferred past the first session/new answer: refinement and autonomous mode (a new session's
# `on_session` runs right after its answer), with harness_store and pydantic (~0.1 s); the kernels
# (jupyter_client, zmq) and the wire models (acp.schema, jsonrpcserver) start after it too.
NOT_BEFORE_SESSION_NEW = (
    "acp",
    "agent_core.autonomy.controller",
    "agent_core.refinement",
    "harness_store",
    "jsonrpcserver",
    "jsonschema",
    "jupyter_client",
    "pydantic",
    "zmq",
)

# The real entry point, stopped the moment session/new has its answer (the transport writes it next).
SESSION_SPY = """
import json, os, sys
import acp_server.sessions.methods as methods
new_session = methods.AcpServer.new_session
async def spy(self, ctx, req, **kwargs):
    answer = await new_session(self, ctx, req, **kwargs)
    os.write(2, ("MODULES " + json.dumps(["sessionId" in answer, sorted(sys.modules)]) + "\\n").encode())
    os._exit(0)
methods.AcpServer.new_session = spy
from acp_server.cli import main
main([])
"""


def test_refinement_harness_store_and_pydantic_are_not_imported_before_the_session_new_answer(
    tmp_path: Path,
) -> None:
    # Not a plain session/new (its `_meta`): the full path answers it, not early_session.py, whose
    # own imports test_acp_early_session.py pins.
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(tmp_path), "mcpServers": [], "_meta": {}},
        },
    ]
    env = server_env(tmp_path / "home")
    out = subprocess.run(
        [sys.executable, "-c", SESSION_SPY],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, **env},
    )
    [line] = [x for x in out.stderr.splitlines() if x.startswith("MODULES ")]
    answered, modules = json.loads(line.removeprefix("MODULES "))
    assert answered is True
    assert sorted(set(NOT_BEFORE_SESSION_NEW) & set(modules)) == []


# `serve` replaced by a probe that imports what the real one imports (jsonrpcserver -> jsonschema).
SERVE_PROBE = """
import sys
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
