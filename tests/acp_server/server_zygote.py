"""Servers forked from a pre-imported zygote (zygote_main.py), with a `subprocess.Popen`-like handle.

One zygote per pytest worker, started at its first use. `launch()` gives a `ZygoteProcess` for
`python -m acp_server ...`: `pid`, `stdin`, `stdout`, `returncode`, `poll()`, `wait()`, `kill()`,
`terminate()`, `send_signal()` — what `AcpClient` and the tests use of a Popen.

Which servers are forked: `uses_zygote()`. Exec (a real `python -m acp_server`) stays the launch for
what a fork cannot show: the referee's and the hostile repository's tests (they read the server's
`/proc` entries and its environment block, and count its parent), tests of the launch itself
(marked `exec_launch`), any other argv, and every server when `CONTINUAL_ACP_TEST_LAUNCH=exec` (the
suite's stall benchmark sets it: an import stall is one of the stalls it reports).

A client the suite does not drive through `launch()` (the eval's runner, the Node SDK's conformance
clients) gets `server_command()`: the launcher zygote_launch.py, an exec'd stdlib stub that has the
same zygote fork its server, under the same rule.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

_MAIN = Path(__file__).with_name("zygote_main.py")
_LAUNCH = Path(__file__).with_name("zygote_launch.py")
_lock = threading.Lock()
_zygote: _Zygote | None = None

# Set per test by tests/conftest.py: False for the tests that must exec their servers.
forking_allowed = True


def uses_zygote(argv: list[str] | None) -> bool:
    if not forking_allowed or os.environ.get("CONTINUAL_ACP_TEST_LAUNCH") == "exec":
        return False
    return argv is None or argv[:3] == [sys.executable, "-m", "acp_server"]


def server_command() -> list[str]:
    """The server command to give a client that starts servers itself (the eval's runner, the Node
    conformance clients): the launcher (zygote_launch.py) on this worker's zygote when
    `uses_zygote(None)`, else `python -m acp_server`. The client appends the server's arguments."""
    if not uses_zygote(None):
        return [sys.executable, "-m", "acp_server"]
    # -I -S: the launcher needs the standard library only; no site-packages scan at each start.
    return [sys.executable, "-I", "-S", str(_LAUNCH), _the_zygote().path]


class _Zygote:
    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="acp-zygote-")
        self.path = os.path.join(self._dir, "zygote.sock")
        self.proc = subprocess.Popen(
            [sys.executable, str(_MAIN), self.path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=self._dir,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line != b"ready\n":
            raise RuntimeError(f"the server zygote did not start (it said {line!r})")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # its cue to exit
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _the_zygote() -> _Zygote:
    global _zygote
    with _lock:
        if _zygote is None or _zygote.proc.poll() is not None:
            _zygote = _Zygote()
            atexit.register(_zygote.close)
        return _zygote


class ZygoteProcess:
    """A forked server, as much of a `subprocess.Popen` as the suite uses."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str], cwd: str | None, stderr: IO[bytes] | int | None
    ) -> None:
        zygote = _the_zygote()
        child_in, self_in = os.pipe()
        self_out, child_out = os.pipe()
        err_fd = stderr if isinstance(stderr, int) else (stderr.fileno() if stderr is not None else 2)
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._conn.connect(zygote.path)
        request = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode() + b"\n"
        try:
            socket.send_fds(self._conn, [request], [child_in, child_out, err_fd])
        finally:
            os.close(child_in)
            os.close(child_out)
        self.args = argv
        self.stdin: IO[bytes] | None = os.fdopen(self_in, "wb")
        self.stdout: IO[bytes] | None = os.fdopen(self_out, "rb")
        self.stderr = None
        self.returncode: int | None = None
        self._buffer = b""
        self._read_lock = threading.Lock()
        line = self._line(timeout=30)
        if line is None or not line.startswith("pid "):
            raise RuntimeError(f"the server zygote did not fork a server: {line!r}")
        self.pid = int(line.split()[1])

    def _line(self, timeout: float | None) -> str | None:
        """The zygote's next line, or None if none came within `timeout` (None: wait)."""
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if not ready:
                return None
            chunk = self._conn.recv(4096)
            if not chunk:
                raise RuntimeError("the server zygote closed the connection without an exit status")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def poll(self) -> int | None:
        return self._wait(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._wait(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def _wait(self, timeout: float | None) -> int | None:
        with self._read_lock:
            if self.returncode is None:
                line = self._line(timeout)
                if line is not None:
                    if not line.startswith("exit "):
                        raise RuntimeError(f"the server zygote said {line!r}")
                    self.returncode = int(line.split()[1])
                    self._conn.close()
            return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __repr__(self) -> str:
        return f"<ZygoteProcess pid={self.pid} returncode={self.returncode}>"


def launch(argv: list[str], *, env: dict[str, str], cwd: str | None, stderr: IO[bytes] | int | None) -> Any:
    """A forked server for `argv` (`python -m acp_server ...`)."""
    return ZygoteProcess(argv, env=env, cwd=cwd, stderr=stderr)
