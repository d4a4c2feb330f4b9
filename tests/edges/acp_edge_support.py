"""Shared by the edge tests: a small synchronous ACP peer over a real child's stdio."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


class StdioPeer:
    """Speaks newline-delimited JSON-RPC to a spawned agent; stderr is kept for failure messages."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr_chunks: list[bytes] = []
        self.notifications: list[dict[str, Any]] = []
        self._next_id = 0
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            # A non-JSON line on stdout is a protocol violation: surface it as a failure, not a skip.
            self._lines.put(json.loads(raw))
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr_chunks.append(raw)

    @property
    def stderr(self) -> str:
        return b"".join(self.stderr_chunks).decode(errors="replace")

    def request(self, method: str, params: dict[str, Any], *, timeout: float = 30.0) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(
            (json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode()
        )
        self.proc.stdin.flush()
        while True:
            try:
                msg = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"no answer to {method} within {timeout}s; stderr:\n{self.stderr}"
                ) from None
            if msg is None:
                raise AssertionError(f"agent closed stdout before answering {method}; stderr:\n{self.stderr}")
            if msg.get("id") == rid and "method" not in msg:
                return msg
            self.notifications.append(msg)

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


def processes_with_env(key: str, value: str) -> list[str]:
    """Command lines of live processes whose environment has `key=value` (children inherit it)."""
    needle = f"{key}={value}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found
