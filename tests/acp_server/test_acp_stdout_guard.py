"""stdout carries JSON-RPC lines only, whoever else prints: handlers, libraries, child processes."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from acp_helpers import ClientFactory, initialize

# The real server, with `initialize` wrapped to misbehave in every way a stray print can happen:
# Python print, a C-level write to fd 1, and a child process inheriting fd 1. (Kernel processes are
# children too; the prompt tests cover a cell that writes to its fd 1.)
NOISY_SERVER = textwrap.dedent(
    """
    import os, subprocess, sys
    print("noise before the guard is installed goes to the real stdout", file=sys.stderr)
    from acp_server.sessions import methods

    original = methods.AcpServer.initialize

    early = methods.AcpServer.initialized_early

    def noise():
        print("stray print from a handler")
        sys.stdout.write("stray sys.stdout.write\\n")
        os.write(1, b"stray os.write to fd 1\\n")
        subprocess.run([sys.executable, "-c", "print('stray print from a child process')"], check=True)

    async def noisy_initialize(self, ctx, params):
        noise()
        return await original(self, ctx, params)

    def noisy_initialized_early(self, params):  # the first initialize is answered early
        noise()
        early(self, params)

    methods.AcpServer.initialize = noisy_initialize
    methods.AcpServer.initialized_early = noisy_initialized_early
    from acp_server.cli import main
    raise SystemExit(main(["serve"]))
    """
)


def test_prints_from_handlers_libraries_and_children_never_reach_stdout(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    script = tmp_path / "noisy_server.py"
    script.write_text(NOISY_SERVER)
    client = spawn(argv=[sys.executable, str(script)])
    assert initialize(client)["protocolVersion"] == 1
    assert client.close() == 0
    assert client.garbage == []
    stderr = client.stderr()
    for noise in ("stray print from a handler", "stray os.write to fd 1", "stray print from a child process"):
        assert noise in stderr  # moved to the log, not lost
